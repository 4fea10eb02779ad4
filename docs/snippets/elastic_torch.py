# ruff: noqa: F821 (model and optimizer are the names the page's script defines: this file runs beside its block)
# Prelude of docs/elastic.md's PyTorch script: what the page leaves to the reader (the model, the
# data set, one training step, the number of epochs), small enough for a test.
import torch

epochs = 2
dataset = torch.utils.data.TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))


def build():
    model = torch.nn.Linear(8, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def step(x, y):
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
