"""The static pass: source files in, findings out, without importing torch."""
