// The layout of a member's negotiation record, the fixed-size message of a cycle's step 1
// (controller.h): a header, three bitmaps of one bit per cache slot, and the inline area. Every
// member derives the same layout from state they all share (the cache's slot count and the cycle's
// inline space), so the gathered records line up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hvdcore {

// Inline data is reduced where it lies in the gathered records, so every part starts on a multiple
// of the widest element (8 bytes): records, their inline area and each part are padded to it.
constexpr size_t kInlineAlign = 8;
inline size_t AlignUp(size_t bytes) { return (bytes + kInlineAlign - 1) & ~(kInlineAlign - 1); }

// The flags of a record. kOnlyHits: all of the member's work is the cache hits in its bitmap
// (nothing queued, pending in another set or with the coordinator), so it is done once they have run.
constexpr uint8_t kShutdown = 1, kNeedCoordinator = 2, kJoined = 4, kBusy = 8, kFailed = 16, kOnlyHits = 32;

// The three bitmaps, by what a member's bit for a cache slot says: it has the slot's tensor ready;
// it sent the slot's data inline (an allreduce's, or a broadcast's root's), or for an allgather or
// alltoall its new sizes; it sent an allgather's or alltoall's data inline (after those sizes).
enum class SlotBits : uint8_t { kHave = 0, kInline = 1, kGathered = 2 };

struct RecordLayout {
  static constexpr size_t kFlagsAt = 0;          // uint8 flags
  static constexpr size_t kSettingsFlagsAt = 1;  // uint8: the switches of tuned settings (tuned_settings.h)
  static constexpr size_t kRequestLenAt = 4;     // uint32: bytes of new requests for the coordinator
  static constexpr size_t kEagerSlotAt = 8;      // int32: cache slot of its eager messages (eager.h), or -1
  static constexpr size_t kUsedAt = 12;          // uint32: bytes in use from the start; zeros after them
  static constexpr size_t kSettingsAt = 16;      // 16 bytes: tuned settings, on rank 0 of the global set
  static constexpr size_t kBitmapsAt = 32;       // the three bitmaps, in SlotBits order

  // Where the inline area starts: after the header and the bitmaps for `slots` cache slots.
  static size_t InlineAt(int32_t slots) { return AlignUp(kBitmapsAt + 3 * BitmapBytes(slots)); }
  static size_t BitmapBytes(int32_t slots) { return ((size_t)slots + 7) / 8; }

  RecordLayout(int32_t slots, size_t inline_space)
      : bitmap_bytes(BitmapBytes(slots)), inline_at(InlineAt(slots)), size(inline_at + AlignUp(inline_space)) {}

  const size_t bitmap_bytes;
  const size_t inline_at;
  const size_t size;

  bool Bit(const uint8_t* record, SlotBits which, int32_t slot) const {
    return (record[BitmapAt(which) + (slot >> 3)] >> (slot & 7)) & 1;
  }
  void SetBit(uint8_t* record, SlotBits which, int32_t slot) const {
    record[BitmapAt(which) + (slot >> 3)] |= (uint8_t)(1u << (slot & 7));
  }

  // A header field (records are bytes: fields are copied, never cast in place).
  template <class T>
  static T Read(const uint8_t* record, size_t at) {
    T value;
    std::memcpy(&value, record + at, sizeof value);
    return value;
  }
  template <class T>
  static void Write(uint8_t* record, size_t at, T value) {
    std::memcpy(record + at, &value, sizeof value);
  }

 private:
  size_t BitmapAt(SlotBits which) const { return kBitmapsAt + (size_t)which * bitmap_bytes; }
};

}  // namespace hvdcore
