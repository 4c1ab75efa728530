"""Crossover: will a GPU make my small PyTorch model faster, and why or why not?"""
__version__ = "0.2.0"
