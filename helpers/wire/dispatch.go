package wire

// Accept is one request type a helper dispatches.
type Accept struct {
	Type MsgType
	// Once marks requests that are meaningful only once per connection; a
	// second one is a protocol error rather than something to re-handle.
	Once bool
}

// Accepts lists, per helper executable name, the request types it
// dispatches. It is the single source of truth: Server refuses to start if
// its handler table differs from its entry here, so the documented table in
// the package doc, this map and the code cannot silently drift. Anything not
// listed, including reply types, is a protocol error at that helper — a
// compromised supervisor must not reach code paths a helper never meant to
// expose.
var Accepts = map[string][]Accept{
	"glove-mounter":     {{MsgHello, true}, {MsgBind, false}, {MsgTmpfs, false}},
	"glove-loopext4":    {{MsgHello, true}, {MsgCreate, false}, {MsgAttach, false}, {MsgFreeze, false}},
	"glove-cgroup":      {{MsgHello, true}, {MsgCgCreate, false}, {MsgCgPlace, false}, {MsgCgKill, false}, {MsgCgRemove, false}, {MsgCgStat, false}, {MsgCgFreeze, false}, {MsgCgRemoveEmpty, false}},
	"glove-streamproxy": {{MsgHello, true}, {MsgStreamOpen, true}, {MsgStreamStatus, false}, {MsgStreamClose, false}},
}
