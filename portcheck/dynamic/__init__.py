"""The dynamic pass (`portcheck trace`): build the model in a child process, capture its ATen graph with
torch.export (or, where export fails, torch._dynamo / torch.fx), and check the graph against Neuron.

Only `request`, `runner` and `report` are imported by the parent process; they never import torch.
Everything that touches torch runs in the child (`child` and the modules it imports)."""
