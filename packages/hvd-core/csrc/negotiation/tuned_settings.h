// Engine settings the autotuner changes while a job runs (horovod/common/autotune): proposed on
// rank 0, carried in rank 0's negotiation record of the global set, and applied by every rank at
// the end of the cycle that carried them, so that no rank ever runs with settings another lacks
// (the fusion threshold shapes the calls every rank makes).
#pragma once

#include <cstdint>

#include "negotiation/record_layout.h"

namespace hvdcore {

struct TunedSettings {
  uint32_t epoch = 0;  // 0: none; a proposal's number, one above the last
  uint32_t cycle_time_us = 0;
  int64_t fusion_threshold = 0;
  bool hierarchical_allreduce = false;
  bool hierarchical_allgather = false;
};

inline void WriteSettings(uint8_t* record, const TunedSettings& s) {
  record[RecordLayout::kSettingsFlagsAt] =
      (uint8_t)((s.hierarchical_allreduce ? 1 : 0) | (s.hierarchical_allgather ? 2 : 0));
  RecordLayout::Write<uint32_t>(record, RecordLayout::kSettingsAt, s.epoch);
  RecordLayout::Write<uint32_t>(record, RecordLayout::kSettingsAt + 4, s.cycle_time_us);
  RecordLayout::Write<int64_t>(record, RecordLayout::kSettingsAt + 8, s.fusion_threshold);
}

inline TunedSettings ReadSettings(const uint8_t* record) {
  TunedSettings s;
  s.epoch = RecordLayout::Read<uint32_t>(record, RecordLayout::kSettingsAt);
  s.cycle_time_us = RecordLayout::Read<uint32_t>(record, RecordLayout::kSettingsAt + 4);
  s.fusion_threshold = RecordLayout::Read<int64_t>(record, RecordLayout::kSettingsAt + 8);
  s.hierarchical_allreduce = record[RecordLayout::kSettingsFlagsAt] & 1;
  s.hierarchical_allgather = record[RecordLayout::kSettingsFlagsAt] & 2;
  return s;
}

}  // namespace hvdcore
