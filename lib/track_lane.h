/*
 * track_lane.h: how labelprof's files put a virtual track (lp_track_create,
 * async tracks) on a lane of its own, shared by the library's writers and
 * the command's readers so that the two cannot drift apart. Constants only.
 */
#ifndef LP_TRACK_LANE_H
#define LP_TRACK_LANE_H

/* The first track's tid: far above any kernel thread id (pid_max is at most 2^22); tracks count up from it. */
#define LP__TRACK_FIRST_TID 1000000000u

/* What a track's Perfetto TrackDescriptor description starts with, followed by its tid in decimal. */
#define LP__TRACK_DESCRIPTION "labelprof track, tid "

#endif
