"""(family module: being written)"""
