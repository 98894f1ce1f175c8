package graph

import "hash/maphash"

// index maps node IDs to node numbers (insertion ranks). It is a hash table
// with open addressing and linear probing whose slots hold a node number plus
// one (0 is empty), kept at most half full. It compares IDs in the graph's
// ids slice instead of storing them again, so a slot is 4 bytes and an insert
// about half the work of one into a map[ID]int32. It hashes with
// maphash.Comparable, the hash of Go's maps: an ID type that maps cannot
// hash (an interface holding a slice) panics the same way.
type index[ID comparable] struct {
	seed  maphash.Seed
	slots []int32
	n     int // slots in use
}

// init empties the index and sizes it for n IDs.
func (x *index[ID]) init(n int) {
	x.seed = maphash.MakeSeed()
	x.slots = make([]int32, slotsFor(n))
	x.n = 0
}

// slotsFor returns the table size for n IDs: a power of two, at least 2n.
func slotsFor(n int) int {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	return size
}

// find returns the node number of id among ids, or -1 and the slot where id
// goes. The index must have been initialized.
func (x *index[ID]) find(ids []ID, id ID) (node int32, slot int) {
	mask := len(x.slots) - 1
	for s := int(maphash.Comparable(x.seed, id)) & mask; ; s = (s + 1) & mask {
		v := x.slots[s]
		if v == 0 {
			return -1, s
		}
		if ids[v-1] == id {
			return v - 1, s
		}
	}
}

// lookup returns the node number of id among ids, and false if it has none.
func (x *index[ID]) lookup(ids []ID, id ID) (int32, bool) {
	if len(x.slots) == 0 {
		return -1, false
	}
	i, _ := x.find(ids, id)
	return i, i >= 0
}

// insert puts node number i, whose ID is ids[i], in slot, which find returned
// for that ID, and grows the table when it is half full.
func (x *index[ID]) insert(ids []ID, slot int, i int32) {
	x.slots[slot] = i + 1
	x.n++
	if 2*x.n <= len(x.slots) {
		return
	}
	x.slots = make([]int32, 2*len(x.slots))
	for k := range int32(x.n) {
		_, s := x.find(ids, ids[k])
		x.slots[s] = k + 1
	}
}
