package wire

import "fmt"

var msgNames = map[MsgType]string{
	MsgHello: "Hello", MsgHelloReply: "HelloReply", MsgError: "Error",
	MsgBind: "Bind", MsgBindReply: "BindReply", MsgTmpfs: "Tmpfs", MsgTmpfsReply: "TmpfsReply",
	MsgCreate: "Create", MsgCreateReply: "CreateReply", MsgAttach: "Attach", MsgAttachReply: "AttachReply",
	MsgFreeze: "Freeze", MsgFreezeReply: "FreezeReply",
	MsgCgCreate: "CgCreate", MsgCgCreateReply: "CgCreateReply", MsgCgPlace: "CgPlace", MsgCgPlaceReply: "CgPlaceReply",
	MsgCgKill: "CgKill", MsgCgKillReply: "CgKillReply", MsgCgRemove: "CgRemove", MsgCgRemoveReply: "CgRemoveReply",
	MsgCgStat: "CgStat", MsgCgStatReply: "CgStatReply", MsgCgFreeze: "CgFreeze", MsgCgFreezeReply: "CgFreezeReply",
	MsgCgRemoveEmpty: "CgRemoveEmpty", MsgCgRemoveEmptyReply: "CgRemoveEmptyReply",
	MsgStreamOpen: "StreamOpen", MsgStreamOpenReply: "StreamOpenReply", MsgStreamStatus: "StreamStatus",
	MsgStreamStatusReply: "StreamStatusReply", MsgStreamClose: "StreamClose", MsgStreamCloseReply: "StreamCloseReply",
}

// String names a message type for logs and documentation, e.g. "Bind",
// or its number in hex when it has no name.
func (t MsgType) String() string {
	if n, ok := msgNames[t]; ok {
		return n
	}
	return fmt.Sprintf("%#04x", uint16(t))
}
