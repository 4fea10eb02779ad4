"""``--config-file``: Horovod's YAML runtime configuration, read into flag values.

The layout is Horovod's::

    controller: gloo            # or mpi
    params: {fusion_threshold_mb, cycle_time_ms, cache_capacity, hierarchical_allreduce, hierarchical_allgather,
             torus_allreduce}
    autotune: {enabled, log_file, warmup_samples, steps_per_sample, bayes_opt_max_samples, gaussian_process_noise}
    timeline: {filename, mark_cycles, max_mb, all_ranks, steps}   (max_mb, all_ranks, steps: hvd's own)
    stall_check: {enabled, warning_time_seconds, shutdown_time_seconds}
    library_options: {mpi_threads_disable, num_nccl_streams, thread_affinity, ccl_bgt_affinity, gloo_timeout_seconds}
    logging: {level, with_timestamp}

Flags given on the command line win over the file. Keys this launcher does not know are reported
(as Horovod ignores them silently, files written for it may have some) but do not stop the job.
"""

from __future__ import annotations

from typing import Any

from horovod.runner import env_mapping
from horovod.runner.errors import UsageError

CONTROLLERS = ("gloo", "mpi")


def load(path: str) -> tuple[dict[str, Any], list[str]]:
    """The flag values (dest -> value) a config file sets, and warnings about keys it ignores."""
    import yaml  # only needed with --config-file

    try:
        with open(path, encoding="utf-8") as f:
            document = yaml.safe_load(f)
    except FileNotFoundError:
        raise UsageError(f"--config-file: {path!r} does not exist") from None
    except OSError as error:
        raise UsageError(f"--config-file: cannot read {path!r}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise UsageError(f"--config-file {path}: not valid YAML: {error}") from None
    return parse(document, path)


def parse(document: Any, path: str = "<config>") -> tuple[dict[str, Any], list[str]]:
    if document is None:
        return {}, []
    if not isinstance(document, dict):
        raise UsageError(f"--config-file {path}: expected a mapping of sections at the top level")
    values: dict[str, Any] = {}
    warnings: list[str] = []
    sections = {section for section, _ in env_mapping.BY_CONFIG_KEY}
    for section, content in document.items():
        where = f"--config-file {path}: {section}"
        if section == "controller":
            if not isinstance(content, str) or content.lower() not in CONTROLLERS:
                raise UsageError(f"{where}: {content!r} is not one of {', '.join(CONTROLLERS)}")
            values["use_" + content.lower()] = True
            continue
        if section not in sections:
            warnings.append(f"{where}: unknown section, ignored")
            continue
        if content is None:
            continue
        if not isinstance(content, dict):
            raise UsageError(f"{where}: expected a mapping of keys")
        for key, value in content.items():
            tunable = env_mapping.BY_CONFIG_KEY.get((section, key))
            if tunable is None:
                warnings.append(f"{where}.{key}: unknown key, ignored")
                continue
            if value is None:
                continue
            value = env_mapping.validate(tunable, value, f"{where}.{key}")
            values[tunable.dest] = (not value) if tunable.config_inverted else value
    return values, warnings
