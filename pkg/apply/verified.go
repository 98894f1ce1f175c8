package apply

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// verifiedShards is how many parts verifiedSet splits its map into, so that concurrent nodes
// rarely wait on one lock.
const verifiedShards = 16

// verifiedSet is the engine's verifiedAt per object UID, safe for concurrent use. Its maps hold
// the values themselves: a sync.Map would box each key and value and add a node per entry,
// about twice the memory for the 10 000 objects of a 1000-owner manager (docs/benchmarks.md,
// section 3).
type verifiedSet struct {
	shards [verifiedShards]verifiedShard
}

// verifiedShard is one part of a verifiedSet.
type verifiedShard struct {
	mu sync.RWMutex
	m  map[types.UID]verifiedAt
}

// shard returns the part that holds uid: the one its last hex digit names. The API server's UIDs
// are random (RFC 4122 version 4), so their last digit spreads them over all 16 parts; any other
// string works too.
func (s *verifiedSet) shard(uid types.UID) *verifiedShard {
	return &s.shards[shardOf(uid)]
}

// shardOf is the index of uid's part: its last character's hex value, or that byte modulo
// verifiedShards when it is not a lower-case hex digit.
func shardOf(uid types.UID) int {
	if len(uid) == 0 {
		return 0
	}
	switch b := uid[len(uid)-1]; {
	case '0' <= b && b <= '9':
		return int(b - '0')
	case 'a' <= b && b <= 'f':
		return int(b-'a') + 10
	default:
		return int(b) % verifiedShards
	}
}

func (s *verifiedSet) load(uid types.UID) (verifiedAt, bool) {
	sh := s.shard(uid)
	sh.mu.RLock()
	v, ok := sh.m[uid]
	sh.mu.RUnlock()
	return v, ok
}

func (s *verifiedSet) store(uid types.UID, v verifiedAt) {
	sh := s.shard(uid)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = map[types.UID]verifiedAt{}
	}
	sh.m[uid] = v
	sh.mu.Unlock()
}

func (s *verifiedSet) delete(uid types.UID) {
	sh := s.shard(uid)
	sh.mu.Lock()
	delete(sh.m, uid)
	sh.mu.Unlock()
}
