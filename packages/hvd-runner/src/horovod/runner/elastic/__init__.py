"""Elastic jobs: ``horovodrun --min-np/--max-np/--host-discovery-script``.

:mod:`.driver` decides (which workers run, when a new world forms), :mod:`.discovery` and
:mod:`.host_manager` say where workers may run, :mod:`.job` wires them to processes and the
rendezvous server. Workers speak :mod:`horovod.common.elastic.protocol` with the driver.
"""
