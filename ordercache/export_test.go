package ordercache

// Len is the number of decoded orders d holds, for tests.
func (d *Decoded) Len() int {
	n := 0
	for i := range d.shard {
		d.shard[i].mu.Lock()
		n += len(d.shard[i].m)
		d.shard[i].mu.Unlock()
	}
	return n
}
