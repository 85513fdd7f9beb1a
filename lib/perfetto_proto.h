/*
 * perfetto_proto.h: the numbers of Perfetto's trace format (protos/perfetto/
 * trace) that labelprof writes and reads, shared by the library's writers
 * (export_perfetto.c, stream_encode.c, through perfetto.h) and the command's
 * reader (tools/read/perfetto.c), so that the two cannot drift apart, as
 * track_lane.h is. Constants only; tests/perfetto_subset.proto names the
 * fields the library writes, and protoc checks its files against it.
 *
 * Each name is its message's prefix, then the field: TP_ a TracePacket's,
 * TE_ a TrackEvent's, TD_ a TrackDescriptor's, and so on.
 */
#ifndef LP_PERFETTO_PROTO_H
#define LP_PERFETTO_PROTO_H

enum {
  /* Trace */
  TRACE_PACKET = 1,
  /* TracePacket */
  TP_CLOCK_SNAPSHOT = 6, TP_TIMESTAMP = 8, TP_SEQ_ID = 10, TP_TRACK_EVENT = 11, TP_INTERNED = 12,
  TP_SEQ_FLAGS = 13, TP_INCREMENTAL_CLEARED = 41, TP_PROCESS_DESCRIPTOR = 43, TP_THREAD_DESCRIPTOR = 44,
  TP_CLOCK_ID = 58, TP_DEFAULTS = 59, TP_TRACK_DESCRIPTOR = 60, TP_FIRST_ON_SEQ = 87,
  /* ClockSnapshot, and its Clock */
  CS_CLOCKS = 1, CLK_ID = 1, CLK_TS = 2, CLK_INCREMENTAL = 3, CLK_UNIT_MULTIPLIER = 4,
  /* TracePacketDefaults, and its TrackEventDefaults */
  DEF_CLOCK_ID = 58, DEF_TRACK_EVENT = 11, TED_TRACK_UUID = 11,
  /* TrackDescriptor */
  TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8, TD_STATIC_NAME = 10,
  TD_CHILD_ORDERING = 11, TD_RANK = 12, TD_ATRACE_NAME = 13, TD_DESCRIPTION = 14, TD_MERGE = 15, MERGE_NONE = 2,
  /* ProcessDescriptor, ThreadDescriptor */
  PD_PID = 1, PD_NAME = 6, THD_PID = 1, THD_TID = 2, THD_NAME = 5, THD_REFERENCE_US = 6,
  /* TrackEvent */
  TE_DELTA_US = 1, TE_CATEGORY_IIDS = 3, TE_DEBUG = 4, TE_LEGACY = 6, TE_TYPE = 9, TE_NAME_IID = 10,
  TE_TRACK_UUID = 11, TE_ABSOLUTE_US = 16, TE_CATEGORIES = 22, TE_NAME = 23, TE_COUNTER_VALUE = 30,
  TE_DOUBLE_COUNTER_VALUE = 44,
  /* TrackEvent.LegacyEvent */
  LE_NAME_IID = 1, LE_PHASE = 2, LE_DURATION_US = 3, LE_INSTANT_SCOPE = 14, LE_PID_OVERRIDE = 18,
  LE_TID_OVERRIDE = 19,
  /* DebugAnnotation */
  DA_NAME_IID = 1, DA_BOOL = 2, DA_UINT = 3, DA_INT = 4, DA_STRING = 6, DA_NAME = 10,
  /* InternedData, and its EventCategory, EventName, DebugAnnotationName */
  ID_CATEGORIES = 1, ID_NAMES = 2, ID_DEBUG_NAMES = 3, IN_IID = 1, IN_NAME = 2,
};
/* The tag byte every packet of a file starts with: Trace's field 1, length-delimited (0x0a). */
#define TRACE_PACKET_TAG (TRACE_PACKET << 3 | 2)
/* TrackEvent.Type */
enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
/* TracePacket.SequenceFlags */
enum { SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
/* LegacyEvent.InstantEventScope */
enum { LE_SCOPE_GLOBAL = 1, LE_SCOPE_PROCESS = 2 };
/* The builtin clocks' ids, and the first a sequence may define for itself. */
enum { CLOCK_REALTIME_ID = 1, CLOCK_MONOTONIC_ID = 3, CLOCK_BOOTTIME_ID = 6, CLOCK_LANE = 64 };

#endif
