"""Decodes a timeline.perfetto-trace with the `perfetto` PyPI package's own generated schema, an
encoder-independent check of analyzer/src/export/perfetto.rs (docs/performance.md):
every interned event name defined on its sequence, every slice closed, nesting depth
per track, every flow ended. The trace processor of that package is not used: it
downloads a trace_processor_shell binary on first use.

    python -m venv /tmp/pf && /tmp/pf/bin/pip install perfetto
    /tmp/pf/bin/python analyzer/tests/perfetto_check.py DIR/timeline.perfetto-trace  # exits non-zero on a failed check
"""
import sys, collections
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], 'rb').read())
names = {}
kinds = collections.Counter()
depth = collections.defaultdict(int)
maxdepth = collections.defaultdict(int)
tracks = {}
seq_default = {}
flows_ids = set(); term = set()
for p in t.packet:
    seq = p.trusted_packet_sequence_id
    if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
        names[seq] = {}
    if p.HasField('trace_packet_defaults'):
        seq_default[seq] = p.trace_packet_defaults.track_event_defaults.track_uuid
    if p.HasField('interned_data'):
        for n in p.interned_data.event_names: names[seq][n.iid] = n.name
    if p.HasField('track_descriptor'):
        d = p.track_descriptor
        tracks[d.uuid] = d.thread.thread_name if d.HasField('thread') else (d.process.process_name if d.HasField('process') else d.name)
    if p.HasField('track_event'):
        e = p.track_event
        tr = e.track_uuid if e.HasField('track_uuid') else seq_default[seq]
        kinds[pb.TrackEvent.Type.Name(e.type)] += 1
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            if e.HasField('name_iid'): assert e.name_iid in names[seq]
            depth[tr] += 1; maxdepth[tr] = max(maxdepth[tr], depth[tr])
            flows_ids.update(e.flow_ids); term.update(e.terminating_flow_ids)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            depth[tr] -= 1; assert depth[tr] >= 0
print('packets', len(t.packet), dict(kinds))
print('tracks', len(tracks))
for u, d in maxdepth.items(): print('  track', tracks.get(u), 'max depth', d, 'open at end', depth[u])
print('flows', len(term), 'every flow ends:', (flows_ids | term) == term)
assert all(d == 0 for d in depth.values()), 'slices left open'
assert (flows_ids | term) == term, 'a flow never ends'
