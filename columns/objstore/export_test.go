package objstore

// SetPartGrowth sets partGrowth for a test and returns the function that restores it.
func SetPartGrowth(n int) func() {
	saved := partGrowth
	partGrowth = n
	return func() { partGrowth = saved }
}
