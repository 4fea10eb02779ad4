"""Horovod 0.28.1's public API of horovod.torch, horovod.common and horovod.runner (and horovod.run), as data.

test_horovod_api.py walks these lists and checks hvd against them. They describe Horovod, not hvd:
never regenerate them from hvd's modules. Where they came from: Horovod 0.28.1's own sources, the
sdist ``pip download --no-deps --no-binary :all: horovod==0.28.1``, extracted on 2026-11-25 with a
throwaway ``ast`` script (not kept: the lists below are the record) from horovod/__init__.py,
horovod/torch/{__init__,mpi_ops,functions,optimizer,sync_batch_norm,compression}.py,
horovod/torch/elastic/{__init__,state,sampler}.py, horovod/common/{basics,process_sets,util,
exceptions,elastic}.py, horovod/runner/__init__.py and horovod/runner/launch.py (``parse_args``).

What counts as public (documented in ../shared/seeds/ or what users import):
- horovod.torch: every name its ``__init__`` imports, with the module it imports it from (REEXPORTS:
  ``from horovod.torch.mpi_ops import allreduce`` must keep working too); ``mpi_ops``'s own
  ``is_homogeneous`` and ``handle_average_backwards_compatibility``; the compressors of
  ``horovod.torch.compression``; ``horovod.torch.elastic``'s ``__all__`` (TorchState, ElasticSampler,
  run). ``hvd.init``/``hvd.shutdown`` are ``def init(*args, **kwargs)`` wrappers in mpi_ops that
  forward to ``HorovodBasics.init``/``shutdown``: their documented signature is HorovodBasics's,
  as for the names mpi_ops binds from its ``_basics`` (``size = _basics.size``...).
- DistributedOptimizer is a function in Horovod; ``DistributedOptimizer.<method>`` are the public
  methods of the optimizer it returns (``_DistributedOptimizer``).
- horovod.common: the public names of basics (HorovodBasics), process_sets, exceptions, util and
  elastic (Horovod's ``horovod/common/__init__.py`` is empty).
- horovod.runner: ``run``; ``launch.parse_args`` and ``launch.run_commandline`` (horovodrun's entry
  point); horovodrun's flags (HOROVODRUN_FLAGS, from ``parse_args``'s ``add_argument`` calls).
Left out as implementation details: mpi_ops's autograd Functions (``HorovodAllreduce``...), the
compiled ``mpi_lib``, ``_DistributedOptimizer.find_duplicates`` (the elastic state handlers,
``horovod.torch.elastic.state.*StateHandler``, are tested by test_elastic.py), launch.py's argparse action factories and its
``_run``/``check_build``/``run_controller`` helpers.
The seeds' API page documents ``ElasticSampler.get_indices``/``record_indices``: an older Horovod's;
0.28.1's sampler has ``record_batch``, ``state_dict``/``load_state_dict`` and ``reset`` instead (below).
"""

from __future__ import annotations

from typing import NamedTuple

# A parameter: (name, kind) when Horovod gives it no default, (name, kind, default) when it does.
POS = "positional-or-keyword"
KW = "keyword-only"
VAR = "*args"
VARKW = "**kwargs"

# How a method is defined in Horovod's class (METHODS' second field).
METHOD = "method"
STATIC = "staticmethod"


class Ref(NamedTuple):
    """A default or value that is a Horovod object, by its import path; the test resolves the same
    path in hvd and compares by identity (``Average``: by value, it is an int)."""

    path: str


# One entry per line, sorted, however long (the formatter leaves the lists alone).
# ruff: noqa: E501
# fmt: off

# (module, name, parameters): functions, and the callables a module binds (``size = _basics.size``).
FUNCTIONS = [
    ("horovod", "run", (("func", POS), ("args", POS, ()), ("kwargs", POS, None), ("num_proc", POS, 1), ("min_num_proc", POS, None), ("max_num_proc", POS, None), ("slots", POS, None), ("reset_limit", POS, None), ("cooldown_range", POS, None), ("hosts", POS, None), ("hostfile", POS, None), ("host_discovery_script", POS, None), ("start_timeout", POS, None), ("ssh_port", POS, None), ("ssh_identity_file", POS, None), ("disable_cache", POS, None), ("output_filename", POS, None), ("verbose", POS, None), ("use_gloo", POS, None), ("use_mpi", POS, None), ("mpi_args", POS, None), ("network_interface", POS, None), ("network_interfaces", POS, None), ("executable", POS, None), ("np", POS, None), ("min_np", POS, None), ("max_np", POS, None))),
    ("horovod.common.elastic", "run_fn", (("func", POS), ("reset", POS))),
    ("horovod.common.exceptions", "get_version_mismatch_message", (("name", POS), ("version", POS), ("installed_version", POS))),
    ("horovod.common.process_sets", "add_process_set", (("process_set", POS),)),
    ("horovod.common.process_sets", "remove_process_set", (("process_set", POS),)),
    ("horovod.common.util", "ccl_built", (("verbose", POS, False),)),
    ("horovod.common.util", "check_extension", (("ext_name", POS), ("ext_env_var", POS), ("pkg_path", POS), ("args", VAR))),
    ("horovod.common.util", "check_installed_version", (("name", POS), ("version", POS), ("exception", POS, None))),
    ("horovod.common.util", "ddl_built", (("verbose", POS, False),)),
    ("horovod.common.util", "env", (("kwargs", VARKW),)),
    ("horovod.common.util", "extension_available", (("ext_base_name", POS), ("verbose", POS, False))),
    ("horovod.common.util", "get_average_backwards_compatibility_fun", (("reduce_ops", POS),)),
    ("horovod.common.util", "get_ext_suffix", ()),
    ("horovod.common.util", "get_extension_full_path", (("pkg_path", POS), ("args", VAR))),
    ("horovod.common.util", "gloo_built", (("verbose", POS, False),)),
    ("horovod.common.util", "gpu_available", (("ext_base_name", POS), ("verbose", POS, False))),
    ("horovod.common.util", "is_iterable", (("x", POS),)),
    ("horovod.common.util", "is_version_greater_equal_than", (("ver", POS), ("target", POS))),
    ("horovod.common.util", "mpi_built", (("verbose", POS, False),)),
    ("horovod.common.util", "nccl_built", (("verbose", POS, False),)),
    ("horovod.common.util", "num_rank_is_power_2", (("num_rank", POS),)),
    ("horovod.common.util", "split_list", (("l", POS), ("n", POS))),
    ("horovod.runner", "run", (("func", POS), ("args", POS, ()), ("kwargs", POS, None), ("num_proc", POS, 1), ("min_num_proc", POS, None), ("max_num_proc", POS, None), ("slots", POS, None), ("reset_limit", POS, None), ("cooldown_range", POS, None), ("hosts", POS, None), ("hostfile", POS, None), ("host_discovery_script", POS, None), ("start_timeout", POS, None), ("ssh_port", POS, None), ("ssh_identity_file", POS, None), ("disable_cache", POS, None), ("output_filename", POS, None), ("verbose", POS, None), ("use_gloo", POS, None), ("use_mpi", POS, None), ("mpi_args", POS, None), ("network_interface", POS, None), ("network_interfaces", POS, None), ("executable", POS, None), ("np", POS, None), ("min_np", POS, None), ("max_np", POS, None))),
    ("horovod.runner.launch", "parse_args", ()),
    ("horovod.runner.launch", "run_commandline", ()),
    ("horovod.torch", "DistributedOptimizer", (("optimizer", POS), ("named_parameters", POS, None), ("compression", POS, Ref("horovod.torch.compression.Compression.none")), ("backward_passes_per_step", POS, 1), ("op", POS, Ref("horovod.torch.mpi_ops.Average")), ("gradient_predivide_factor", POS, 1.0), ("num_groups", POS, 0), ("groups", POS, None), ("sparse_as_dense", POS, False), ("process_set", POS, Ref("horovod.torch.mpi_ops.global_process_set")))),
    ("horovod.torch", "add_process_set", (("process_set", POS),)),
    ("horovod.torch", "allgather", (("tensor", POS), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "allgather_async", (("tensor", POS), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "allgather_object", (("obj", POS), ("name", POS, None))),
    ("horovod.torch", "allreduce", (("tensor", POS), ("average", POS, None), ("name", POS, None), ("compression", POS, Ref("horovod.torch.compression.Compression.none")), ("op", POS, None), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "allreduce_", (("tensor", POS), ("average", POS, None), ("name", POS, None), ("op", POS, None), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "allreduce_async", (("tensor", POS), ("average", POS, None), ("name", POS, None), ("op", POS, None), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "allreduce_async_", (("tensor", POS), ("average", POS, None), ("name", POS, None), ("op", POS, None), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "alltoall", (("tensor", POS), ("splits", POS, None), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "alltoall_async", (("tensor", POS), ("splits", POS, None), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "barrier", (("process_set", POS, Ref("horovod.common.process_sets.global_process_set")),)),
    ("horovod.torch", "broadcast", (("tensor", POS), ("root_rank", POS), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "broadcast_", (("tensor", POS), ("root_rank", POS), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "broadcast_async", (("tensor", POS), ("root_rank", POS), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "broadcast_async_", (("tensor", POS), ("root_rank", POS), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "broadcast_object", (("obj", POS), ("root_rank", POS, 0), ("name", POS, None), ("process_set", POS, Ref("horovod.torch.mpi_ops.global_process_set")))),
    ("horovod.torch", "broadcast_optimizer_state", (("optimizer", POS), ("root_rank", POS), ("model", POS, None))),
    ("horovod.torch", "broadcast_parameters", (("params", POS), ("root_rank", POS))),
    ("horovod.torch", "ccl_built", ()),
    ("horovod.torch", "cross_rank", ()),
    ("horovod.torch", "cross_size", ()),
    ("horovod.torch", "cuda_built", ()),
    ("horovod.torch", "ddl_built", ()),
    ("horovod.torch", "gloo_built", ()),
    ("horovod.torch", "gloo_enabled", ()),
    ("horovod.torch", "grouped_allgather", (("tensors", POS), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "grouped_allgather_async", (("tensors", POS), ("name", POS, None), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "grouped_allreduce", (("tensors", POS), ("average", POS, None), ("name", POS, None), ("compression", POS, Ref("horovod.torch.compression.Compression.none")), ("op", POS, None), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "grouped_allreduce_", (("tensors", POS), ("average", POS, None), ("name", POS, None), ("op", POS, None), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "grouped_allreduce_async", (("tensors", POS), ("average", POS, None), ("name", POS, None), ("op", POS, None), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "grouped_allreduce_async_", (("tensors", POS), ("average", POS, None), ("name", POS, None), ("op", POS, None), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "grouped_reducescatter", (("tensors", POS), ("name", POS, None), ("compression", POS, Ref("horovod.torch.compression.Compression.none")), ("op", POS, Ref("horovod.torch.mpi_ops.Average")), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0))),
    ("horovod.torch", "grouped_reducescatter_async", (("tensors", POS), ("name", POS, None), ("op", POS, Ref("horovod.torch.mpi_ops.Average")), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0))),
    ("horovod.torch", "init", (("comm", POS, None), ("process_sets", POS, None))),
    ("horovod.torch", "is_initialized", ()),
    ("horovod.torch", "join", (("device", POS, -1),)),
    ("horovod.torch", "local_rank", ()),
    ("horovod.torch", "local_size", ()),
    ("horovod.torch", "mpi_built", ()),
    ("horovod.torch", "mpi_enabled", ()),
    ("horovod.torch", "mpi_threads_supported", ()),
    ("horovod.torch", "nccl_built", ()),
    ("horovod.torch", "poll", (("handle", POS),)),
    ("horovod.torch", "rank", ()),
    ("horovod.torch", "reducescatter", (("tensor", POS), ("name", POS, None), ("compression", POS, Ref("horovod.torch.compression.Compression.none")), ("op", POS, Ref("horovod.torch.mpi_ops.Average")), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0))),
    ("horovod.torch", "reducescatter_async", (("tensor", POS), ("name", POS, None), ("op", POS, Ref("horovod.torch.mpi_ops.Average")), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")), ("prescale_factor", POS, 1.0), ("postscale_factor", POS, 1.0))),
    ("horovod.torch", "remove_process_set", (("process_set", POS),)),
    ("horovod.torch", "rocm_built", ()),
    ("horovod.torch", "shutdown", ()),
    ("horovod.torch", "size", ()),
    ("horovod.torch", "sparse_allreduce_async", (("tensor", POS), ("name", POS), ("op", POS), ("process_set", POS, Ref("horovod.common.process_sets.global_process_set")))),
    ("horovod.torch", "start_timeline", (("file_path", POS), ("mark_cycles", POS, False))),
    ("horovod.torch", "stop_timeline", ()),
    ("horovod.torch", "synchronize", (("handle", POS),)),
    ("horovod.torch.elastic", "run", (("func", POS),)),
    ("horovod.torch.mpi_ops", "handle_average_backwards_compatibility", (("op", POS), ("average", POS))),
    ("horovod.torch.mpi_ops", "is_homogeneous", ()),
]

# (module, name, base classes, constructor parameters or None where Horovod's class inherits its
# constructor): classes. Bases are what Horovod's code lets users rely on (``except RuntimeError``,
# ``isinstance(m, _BatchNorm)``); plain ``object`` is left out.
CLASSES = [
    ("horovod.common.basics", "HorovodBasics", (), (("pkg_path", POS), ("args", VAR))),
    ("horovod.common.elastic", "ObjectState", ("horovod.common.elastic.State",), (("bcast_object", POS), ("get_rank", POS), ("kwargs", VARKW))),
    ("horovod.common.elastic", "State", (), (("bcast_object", POS), ("get_rank", POS))),
    ("horovod.common.exceptions", "HorovodInternalError", ("builtins.RuntimeError",), None),
    ("horovod.common.exceptions", "HorovodVersionMismatchError", ("builtins.ImportError",), (("name", POS), ("version", POS), ("installed_version", POS))),
    ("horovod.common.exceptions", "HostsUpdatedInterrupt", ("builtins.RuntimeError",), (("skip_sync", POS),)),
    ("horovod.common.process_sets", "ProcessSet", (), (("ranks_or_comm", POS),)),
    ("horovod.torch", "Compression", (), None),
    ("horovod.torch", "HorovodInternalError", ("builtins.RuntimeError",), None),
    ("horovod.torch", "ProcessSet", (), (("ranks_or_comm", POS),)),
    ("horovod.torch", "SyncBatchNorm", ("torch.nn.modules.batchnorm._BatchNorm",), (("num_features", POS), ("eps", POS, 1e-05), ("momentum", POS, 0.1), ("affine", POS, True), ("track_running_stats", POS, True))),
    ("horovod.torch.compression", "Compressor", (), None),
    ("horovod.torch.compression", "FP16Compressor", ("horovod.torch.compression.Compressor",), None),
    ("horovod.torch.compression", "NoneCompressor", ("horovod.torch.compression.Compressor",), None),
    ("horovod.torch.elastic", "ElasticSampler", ("torch.utils.data.Sampler",), (("dataset", POS), ("shuffle", POS, True), ("seed", POS, 0))),
    ("horovod.torch.elastic", "TorchState", ("horovod.common.elastic.ObjectState",), (("model", POS, None), ("optimizer", POS, None), ("kwargs", VARKW))),
]

# (module, "Class.method", how it is defined, parameters without self): public methods.
METHODS = [
    ("horovod.common.basics", "HorovodBasics.ccl_built", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.cross_rank", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.cross_size", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.cuda_built", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.ddl_built", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.gloo_built", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.gloo_enabled", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.init", METHOD, (("comm", POS, None), ("process_sets", POS, None))),
    ("horovod.common.basics", "HorovodBasics.is_homogeneous", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.is_initialized", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.local_rank", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.local_size", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.mpi_built", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.mpi_enabled", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.mpi_threads_supported", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.nccl_built", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.rank", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.rocm_built", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.shutdown", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.size", METHOD, ()),
    ("horovod.common.basics", "HorovodBasics.start_timeline", METHOD, (("file_path", POS), ("mark_cycles", POS, False))),
    ("horovod.common.basics", "HorovodBasics.stop_timeline", METHOD, ()),
    ("horovod.common.elastic", "ObjectState.restore", METHOD, ()),
    ("horovod.common.elastic", "ObjectState.save", METHOD, ()),
    ("horovod.common.elastic", "ObjectState.sync", METHOD, ()),
    ("horovod.common.elastic", "State.check_host_updates", METHOD, ()),
    ("horovod.common.elastic", "State.commit", METHOD, ()),
    ("horovod.common.elastic", "State.on_hosts_updated", METHOD, (("timestamp", POS), ("update_res", POS))),
    ("horovod.common.elastic", "State.on_reset", METHOD, ()),
    ("horovod.common.elastic", "State.register_reset_callbacks", METHOD, (("callbacks", POS),)),
    ("horovod.common.elastic", "State.reset", METHOD, ()),
    ("horovod.common.elastic", "State.restore", METHOD, ()),
    ("horovod.common.elastic", "State.save", METHOD, ()),
    ("horovod.common.elastic", "State.sync", METHOD, ()),
    ("horovod.common.process_sets", "ProcessSet.included", METHOD, ()),
    ("horovod.common.process_sets", "ProcessSet.rank", METHOD, ()),
    ("horovod.common.process_sets", "ProcessSet.size", METHOD, ()),
    ("horovod.torch", "DistributedOptimizer.load_state_dict", METHOD, (("args", VAR), ("kwargs", VARKW))),
    ("horovod.torch", "DistributedOptimizer.set_backward_passes_per_step", METHOD, (("passes", POS),)),
    ("horovod.torch", "DistributedOptimizer.skip_synchronize", METHOD, ()),
    ("horovod.torch", "DistributedOptimizer.step", METHOD, (("closure", POS, None),)),
    ("horovod.torch", "DistributedOptimizer.synchronize", METHOD, ()),
    ("horovod.torch", "DistributedOptimizer.zero_grad", METHOD, ()),
    ("horovod.torch", "ProcessSet.included", METHOD, ()),
    ("horovod.torch", "ProcessSet.rank", METHOD, ()),
    ("horovod.torch", "ProcessSet.size", METHOD, ()),
    ("horovod.torch", "SyncBatchNorm.forward", METHOD, (("input", POS),)),
    ("horovod.torch.compression", "Compressor.compress", STATIC, (("tensor", POS),)),
    ("horovod.torch.compression", "Compressor.decompress", STATIC, (("tensor", POS), ("ctx", POS))),
    ("horovod.torch.compression", "FP16Compressor.compress", STATIC, (("tensor", POS),)),
    ("horovod.torch.compression", "FP16Compressor.decompress", STATIC, (("tensor", POS), ("ctx", POS))),
    ("horovod.torch.compression", "NoneCompressor.compress", STATIC, (("tensor", POS),)),
    ("horovod.torch.compression", "NoneCompressor.decompress", STATIC, (("tensor", POS), ("ctx", POS))),
    ("horovod.torch.elastic", "ElasticSampler.load_state_dict", METHOD, (("state_dict", POS),)),
    ("horovod.torch.elastic", "ElasticSampler.record_batch", METHOD, (("batch_idx", POS), ("batch_size", POS))),
    ("horovod.torch.elastic", "ElasticSampler.reset", METHOD, ()),
    ("horovod.torch.elastic", "ElasticSampler.set_epoch", METHOD, (("epoch", POS),)),
    ("horovod.torch.elastic", "ElasticSampler.state_dict", METHOD, ()),
    ("horovod.torch.elastic", "TorchState.restore", METHOD, ()),
    ("horovod.torch.elastic", "TorchState.save", METHOD, ()),
    ("horovod.torch.elastic", "TorchState.sync", METHOD, ()),
]

# (module, name): names that must exist (on an instance, for attributes instances set).
ATTRIBUTES = [
    ("horovod", "__version__"),
    ("horovod.common.elastic", "notification_manager"),
    ("horovod.common.process_sets", "ProcessSet.mpi_comm"),
    ("horovod.common.process_sets", "ProcessSet.process_set_id"),
    ("horovod.common.process_sets", "ProcessSet.ranks"),
    ("horovod.common.process_sets", "global_process_set"),
    ("horovod.torch", "ProcessSet.mpi_comm"),
    ("horovod.torch", "ProcessSet.process_set_id"),
    ("horovod.torch", "ProcessSet.ranks"),
    ("horovod.torch", "elastic"),
]

# (module, name, value): names whose value Horovod fixes; a Ref must be that very object. The reduce
# ops' values are horovod/common/message.h's enum ReduceOp (what horovod_reduce_op_*() return).
VALUES = [
    ("horovod", "run", Ref("horovod.runner.run")),
    ("horovod.common.basics", "HorovodBasics.Adasum", 2),
    ("horovod.common.basics", "HorovodBasics.Average", 0),
    ("horovod.common.basics", "HorovodBasics.Max", 4),
    ("horovod.common.basics", "HorovodBasics.Min", 3),
    ("horovod.common.basics", "HorovodBasics.Product", 5),
    ("horovod.common.basics", "HorovodBasics.Sum", 1),
    ("horovod.common.util", "EXTENSIONS", ["tensorflow", "torch", "mxnet"]),
    ("horovod.torch", "Adasum", 2),
    ("horovod.torch", "Average", 0),
    ("horovod.torch", "Compression.fp16", Ref("horovod.torch.compression.FP16Compressor")),
    ("horovod.torch", "Compression.none", Ref("horovod.torch.compression.NoneCompressor")),
    ("horovod.torch", "HorovodInternalError", Ref("horovod.common.exceptions.HorovodInternalError")),
    ("horovod.torch", "Max", 4),
    ("horovod.torch", "Min", 3),
    ("horovod.torch", "ProcessSet", Ref("horovod.common.process_sets.ProcessSet")),
    ("horovod.torch", "Product", 5),
    ("horovod.torch", "Sum", 1),
    ("horovod.torch", "add_process_set", Ref("horovod.common.process_sets.add_process_set")),
    ("horovod.torch", "global_process_set", Ref("horovod.common.process_sets.global_process_set")),
    ("horovod.torch", "remove_process_set", Ref("horovod.common.process_sets.remove_process_set")),
]

# (public module, name, module Horovod defines or imports it from): the name must be the same
# object under both import paths.
REEXPORTS = [
    ("horovod.torch", "Adasum", "horovod.torch.mpi_ops"),
    ("horovod.torch", "Average", "horovod.torch.mpi_ops"),
    ("horovod.torch", "Compression", "horovod.torch.compression"),
    ("horovod.torch", "DistributedOptimizer", "horovod.torch.optimizer"),
    ("horovod.torch", "HorovodInternalError", "horovod.torch.mpi_ops"),
    ("horovod.torch", "Max", "horovod.torch.mpi_ops"),
    ("horovod.torch", "Min", "horovod.torch.mpi_ops"),
    ("horovod.torch", "ProcessSet", "horovod.torch.mpi_ops"),
    ("horovod.torch", "Product", "horovod.torch.mpi_ops"),
    ("horovod.torch", "Sum", "horovod.torch.mpi_ops"),
    ("horovod.torch", "SyncBatchNorm", "horovod.torch.sync_batch_norm"),
    ("horovod.torch", "add_process_set", "horovod.torch.mpi_ops"),
    ("horovod.torch", "allgather", "horovod.torch.mpi_ops"),
    ("horovod.torch", "allgather_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "allgather_object", "horovod.torch.functions"),
    ("horovod.torch", "allreduce", "horovod.torch.mpi_ops"),
    ("horovod.torch", "allreduce_", "horovod.torch.mpi_ops"),
    ("horovod.torch", "allreduce_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "allreduce_async_", "horovod.torch.mpi_ops"),
    ("horovod.torch", "alltoall", "horovod.torch.mpi_ops"),
    ("horovod.torch", "alltoall_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "barrier", "horovod.torch.mpi_ops"),
    ("horovod.torch", "broadcast", "horovod.torch.mpi_ops"),
    ("horovod.torch", "broadcast_", "horovod.torch.mpi_ops"),
    ("horovod.torch", "broadcast_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "broadcast_async_", "horovod.torch.mpi_ops"),
    ("horovod.torch", "broadcast_object", "horovod.torch.functions"),
    ("horovod.torch", "broadcast_optimizer_state", "horovod.torch.functions"),
    ("horovod.torch", "broadcast_parameters", "horovod.torch.functions"),
    ("horovod.torch", "ccl_built", "horovod.torch.mpi_ops"),
    ("horovod.torch", "cross_rank", "horovod.torch.mpi_ops"),
    ("horovod.torch", "cross_size", "horovod.torch.mpi_ops"),
    ("horovod.torch", "cuda_built", "horovod.torch.mpi_ops"),
    ("horovod.torch", "ddl_built", "horovod.torch.mpi_ops"),
    ("horovod.torch", "global_process_set", "horovod.torch.mpi_ops"),
    ("horovod.torch", "gloo_built", "horovod.torch.mpi_ops"),
    ("horovod.torch", "gloo_enabled", "horovod.torch.mpi_ops"),
    ("horovod.torch", "grouped_allgather", "horovod.torch.mpi_ops"),
    ("horovod.torch", "grouped_allgather_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "grouped_allreduce", "horovod.torch.mpi_ops"),
    ("horovod.torch", "grouped_allreduce_", "horovod.torch.mpi_ops"),
    ("horovod.torch", "grouped_allreduce_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "grouped_allreduce_async_", "horovod.torch.mpi_ops"),
    ("horovod.torch", "grouped_reducescatter", "horovod.torch.mpi_ops"),
    ("horovod.torch", "grouped_reducescatter_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "init", "horovod.torch.mpi_ops"),
    ("horovod.torch", "is_initialized", "horovod.torch.mpi_ops"),
    ("horovod.torch", "join", "horovod.torch.mpi_ops"),
    ("horovod.torch", "local_rank", "horovod.torch.mpi_ops"),
    ("horovod.torch", "local_size", "horovod.torch.mpi_ops"),
    ("horovod.torch", "mpi_built", "horovod.torch.mpi_ops"),
    ("horovod.torch", "mpi_enabled", "horovod.torch.mpi_ops"),
    ("horovod.torch", "mpi_threads_supported", "horovod.torch.mpi_ops"),
    ("horovod.torch", "nccl_built", "horovod.torch.mpi_ops"),
    ("horovod.torch", "poll", "horovod.torch.mpi_ops"),
    ("horovod.torch", "rank", "horovod.torch.mpi_ops"),
    ("horovod.torch", "reducescatter", "horovod.torch.mpi_ops"),
    ("horovod.torch", "reducescatter_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "remove_process_set", "horovod.torch.mpi_ops"),
    ("horovod.torch", "rocm_built", "horovod.torch.mpi_ops"),
    ("horovod.torch", "shutdown", "horovod.torch.mpi_ops"),
    ("horovod.torch", "size", "horovod.torch.mpi_ops"),
    ("horovod.torch", "sparse_allreduce_async", "horovod.torch.mpi_ops"),
    ("horovod.torch", "start_timeline", "horovod.torch.mpi_ops"),
    ("horovod.torch", "stop_timeline", "horovod.torch.mpi_ops"),
    ("horovod.torch", "synchronize", "horovod.torch.mpi_ops"),
]

# horovodrun's flags, each option string on its own: (option, number of values, type of the values,
# choices). From launch.py's parse_args (-v/--version prints the version and exits).
HOROVODRUN_FLAGS = [
    ("--autotune", 0, None, None),
    ("--autotune-bayes-opt-max-samples", 1, "int", None),
    ("--autotune-gaussian-process-noise", 1, "float", None),
    ("--autotune-log-file", 1, "str", None),
    ("--autotune-steps-per-sample", 1, "int", None),
    ("--autotune-warmup-samples", 1, "int", None),
    ("--binding-args", 1, "str", None),
    ("--blacklist-cooldown-range", 2, "int", None),
    ("--cache-capacity", 1, "int", None),
    ("-cb", 0, None, None),
    ("--check-build", 0, None, None),
    ("--config-file", 1, "str", None),
    ("--cycle-time-ms", 1, "float", None),
    ("--disable-cache", 0, None, None),
    ("--elastic-timeout", 1, "int", None),
    ("--fusion-threshold-mb", 1, "int", None),
    ("--gloo", 0, None, None),
    ("--gloo-timeout-seconds", 1, "int", None),
    ("-H", 1, "str", None),
    ("--hierarchical-allgather", 0, None, None),
    ("--hierarchical-allreduce", 0, None, None),
    ("--host-discovery-script", 1, "str", None),
    ("-hostfile", 1, "str", None),
    ("--hostfile", 1, "str", None),
    ("--hosts", 1, "str", None),
    ("-i", 1, "str", None),
    ("--jsrun", 0, None, None),
    ("--log-hide-timestamp", 0, None, None),
    ("--log-level", 1, "str", ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")),
    ("--log-with-timestamp", 0, None, None),
    ("--log-without-timestamp", 0, None, None),
    ("--max-np", 1, "int", None),
    ("--max-num-proc", 1, "int", None),
    ("--min-np", 1, "int", None),
    ("--min-num-proc", 1, "int", None),
    ("--mpi", 0, None, None),
    ("--mpi-args", 1, "str", None),
    ("--mpi-threads-disable", 0, None, None),
    ("--network-interface", 1, "str", None),
    ("--network-interfaces", 1, "str", None),
    ("--no-autotune", 0, None, None),
    ("--no-hierarchical-allgather", 0, None, None),
    ("--no-hierarchical-allreduce", 0, None, None),
    ("--no-log-hide-timestamp", 0, None, None),
    ("--no-mpi-threads-disable", 0, None, None),
    ("--no-stall-check", 0, None, None),
    ("--no-timeline-mark-cycles", 0, None, None),
    ("--no-torus-allreduce", 0, None, None),
    ("-np", 1, "int", None),
    ("--num-nccl-streams", 1, "int", None),
    ("--num-proc", 1, "int", None),
    ("--output-filename", 1, "str", None),
    ("-p", 1, "int", None),
    ("--prefix-output-with-timestamp", 0, None, None),
    ("-prefix-timestamp", 0, None, None),
    ("--reset-limit", 1, "int", None),
    ("--slots-per-host", 1, "int", None),
    ("--ssh-identity-file", 1, "str", None),
    ("--ssh-port", 1, "int", None),
    ("--stall-check", 0, None, None),
    ("--stall-check-shutdown-time-seconds", 1, "int", None),
    ("--stall-check-warning-time-seconds", 1, "int", None),
    ("--start-timeout", 1, "int", None),
    ("--tcp", 0, None, None),
    ("--thread-affinity", 1, "int", None),
    ("--timeline-filename", 1, "str", None),
    ("--timeline-mark-cycles", 0, None, None),
    ("--torus-allreduce", 0, None, None),
    ("-v", 0, None, None),
    ("--verbose", 0, None, None),
    ("--version", 0, None, None),
]
# fmt: on
