# Prelude of docs/spark.md's run_elastic line: the elastic training function the page describes in
# words (hvd.init(), a State, a function decorated with hvd.elastic.run).
def train():
    import torch

    import horovod.torch as hvd

    hvd.init()
    model = torch.nn.Linear(4, 1)
    state = hvd.elastic.TorchState(model, torch.optim.SGD(model.parameters(), lr=0.1), epoch=0)

    @hvd.elastic.run
    def loop(state):
        while state.epoch < 2:
            hvd.allreduce(torch.ones(1), name="step")
            state.epoch += 1
            state.commit()
        return hvd.rank()

    return loop(state)
