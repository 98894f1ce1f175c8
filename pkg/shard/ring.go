package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// Ring assigns keys (owners' "namespace/name") to members (shard names) by rendezvous hashing
// (highest random weight, Thaler and Ravishankar 1996): each key goes to the member whose hash of
// (member, key) is highest. It is deterministic (every replica computes the same assignment from
// the same members), spreads keys evenly, and moves few keys when the members change: a member
// that joins takes about 1/N of the keys, and only from the others, and a member that leaves
// gives away only its own keys. The zero Ring has no members.
type Ring struct {
	members []string
}

// NewRing returns the Ring of members; duplicates and empty names are ignored, and the order
// does not matter.
func NewRing(members ...string) Ring {
	ms := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			ms = append(ms, m)
		}
	}
	slices.Sort(ms)
	return Ring{members: slices.Compact(ms)}
}

// Members returns the ring's members, sorted.
func (r Ring) Members() []string { return slices.Clone(r.members) }

// Has reports whether member is one of the ring's members.
func (r Ring) Has(member string) bool {
	_, ok := slices.BinarySearch(r.members, member)
	return ok
}

// Owner returns the member key is assigned to, or "" when the ring has no members.
func (r Ring) Owner(key string) string {
	best, bestScore := "", uint64(0)
	for _, m := range r.members {
		if s := score(m, key); best == "" || s > bestScore {
			best, bestScore = m, s
		}
	}
	return best
}

// score is the weight of key on member: the first 8 bytes of SHA-256 over member, a NUL (not
// part of a member's name) and key. A cryptographic hash is more than needed, but it is in the
// standard library, spreads any input evenly and is fast enough for a few members per owner.
func score(member, key string) uint64 {
	h := sha256.New()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}
