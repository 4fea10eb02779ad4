"""The launcher's rendezvous: an authenticated HTTP key-value store that connects a job's ranks.

``server.RendezvousServer`` runs in the launcher; ``client.RendezvousClient`` is the store each
rank's engine uses (through hvd-core's ``hvd_rendezvous_store`` hook, see ``horovod.runner.hooks``).
"""
