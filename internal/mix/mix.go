// Package mix holds the 64-bit mixing function the module's hashes and generators share.
package mix

// Mix64 is the splitmix64 finalizer: a bijection of uint64 that scatters nearby inputs, so that
// sums of mixed values tell sets of inputs apart (with probability about 2^-64 of a collision)
// and seeds a few apart give unrelated streams.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
