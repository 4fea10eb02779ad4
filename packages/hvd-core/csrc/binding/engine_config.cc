// EngineConfig: the settings an engine starts with (horovod.common fills them from HOROVOD_*).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "binding/bindings.h"
#include "engine/engine.h"

namespace hvdcore::binding {

void BindEngineConfig(nb::module_& m) {
  nb::class_<EngineConfig>(m, "EngineConfig")
      .def(nb::init<>())
      .def_rw("rank", &EngineConfig::rank)
      .def_rw("size", &EngineConfig::size)
      .def_rw("key_prefix", &EngineConfig::key_prefix)
      .def_rw("fusion_threshold", &EngineConfig::fusion_threshold)
      .def_rw("cycle_time_ms", &EngineConfig::cycle_time_ms)
      .def_rw("cache_capacity", &EngineConfig::cache_capacity)
      .def_rw("inline_bytes", &EngineConfig::inline_bytes)
      .def_rw("inline_max_bytes", &EngineConfig::inline_max_bytes)
      .def_rw("eager_bytes", &EngineConfig::eager_bytes)
      .def_rw("output_pool_bytes", &EngineConfig::output_pool_bytes)
      .def_rw("stall_check_enabled", &EngineConfig::stall_check_enabled)
      .def_rw("job_stats_enabled", &EngineConfig::job_stats_enabled)
      .def_rw("stall_check_s", &EngineConfig::stall_check_s)
      .def_rw("stall_shutdown_s", &EngineConfig::stall_shutdown_s)
      .def_rw("timeline_path", &EngineConfig::timeline_path)
      .def_rw("timeline_mark_cycles", &EngineConfig::timeline_mark_cycles)
      .def_rw("timeline_max_bytes", &EngineConfig::timeline_max_bytes)
      .def_rw("timeline_all_ranks", &EngineConfig::timeline_all_ranks)
      .def_rw("timeline_steps_from", &EngineConfig::timeline_steps_from)
      .def_rw("timeline_steps_to", &EngineConfig::timeline_steps_to)
      .def_rw("log_level", &EngineConfig::log_level)
      .def_rw("log_hide_time", &EngineConfig::log_hide_time)
      .def_rw("timeout_ms", &EngineConfig::timeout_ms)
      .def_rw("dynamic_process_sets", &EngineConfig::dynamic_process_sets)
      .def_rw("process_sets", &EngineConfig::process_sets)
      .def_rw("failure_report_key", &EngineConfig::failure_report_key)
      .def_rw("failure_report_wait_ms", &EngineConfig::failure_report_wait_ms)
      .def_rw("hierarchical_allreduce", &EngineConfig::hierarchical_allreduce)
      .def_rw("hierarchical_allgather", &EngineConfig::hierarchical_allgather)
      .def_rw("host_key", &EngineConfig::host_key)
      .def_rw("local_rank", &EngineConfig::local_rank)
      .def_rw("device", &EngineConfig::device)
      .def_rw("device_ops", &EngineConfig::device_ops)
      .def_rw("device_timeout_ms", &EngineConfig::device_timeout_ms)
      .def_rw("thread_affinity", &EngineConfig::thread_affinity)
      .def_rw("autotune", &EngineConfig::autotune);
}

}  // namespace hvdcore::binding
