package netpath

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPacketID reads the id out of a packet message's attributes as the
// kernel lays them out (an attribute before NFQA_PACKET_HDR, padding).
func TestPacketID(t *testing.T) {
	hdr := make([]byte, 7)
	binary.BigEndian.PutUint32(hdr, 0xdeadbeef)
	cases := []struct {
		name  string
		attrs []byte
		id    uint32
		ok    bool
	}{
		{"first", attr(nfqaPacketHdr, hdr), 0xdeadbeef, true},
		{"after another", append(attr(9, []byte{1, 2, 3, 4, 5}), attr(nfqaPacketHdr, hdr)...), 0xdeadbeef, true},
		{"absent", attr(9, []byte{1}), 0, false},
		{"truncated", attr(nfqaPacketHdr, hdr)[:6], 0, false},
		{"empty", nil, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, ok := packetID(c.attrs)
			if id != c.id || ok != c.ok {
				t.Fatalf("packetID = %#x, %v; want %#x, %v", id, ok, c.id, c.ok)
			}
		})
	}
}

// TestVerdictMessage checks the batch verdict's layout: one netlink
// message of the queue subsystem, the queue number big-endian, accept up
// to the id.
func TestVerdictMessage(t *testing.T) {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v[0:4], nfAccept)
	binary.BigEndian.PutUint32(v[4:8], 42)
	m := nlmsg(nfqnlMsgVerdictBatch, unix.NLM_F_REQUEST, unix.AF_UNSPEC, 3, attr(nfqaVerdictHdr, v))
	if got := int(binary.NativeEndian.Uint32(m[0:4])); got != len(m) || len(m) != unix.NLMSG_HDRLEN+4+4+8 {
		t.Fatalf("length %d, message %d bytes", got, len(m))
	}
	if typ := binary.NativeEndian.Uint16(m[4:6]); typ != unix.NFNL_SUBSYS_QUEUE<<8|nfqnlMsgVerdictBatch {
		t.Fatalf("type %#x", typ)
	}
	if q := binary.BigEndian.Uint16(m[unix.NLMSG_HDRLEN+2:]); q != 3 {
		t.Fatalf("queue %d", q)
	}
	if id := binary.BigEndian.Uint32(m[len(m)-4:]); id != 42 {
		t.Fatalf("id %d", id)
	}
}
