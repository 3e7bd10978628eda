"""portcheck: find what breaks when a PyTorch model moves from NVIDIA GPUs to AWS Trainium2 / Inferentia2."""

__version__ = "0.1.0"
