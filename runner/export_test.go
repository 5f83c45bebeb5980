package runner

// The start barrier's pieces, for the external test package's tests on
// real Redis (barrier_test.go).
var (
	Released     = released
	WatchBarrier = watchBarrier
)
