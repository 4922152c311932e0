package agent

import (
	"strconv"
	"sync"
	"testing"
)

// The scales kept across runs stay bounded whatever the number of
// tenants (a server running for months), keep the last report of each
// (tenant, model), and are safe for concurrent runs.
func TestUsageScalesBoundedAndConcurrent(t *testing.T) {
	var s usageScales
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				k := scaleKey{"t" + strconv.Itoa(g) + "-" + strconv.Itoa(i), "m"}
				s.set(k, 2)
				_ = s.get(k)
			}
		}()
	}
	wg.Wait()
	if n := s.len(); n != maxUsageScales {
		t.Fatalf("%d scales kept after 12000 tenants; want at most (and, full, exactly) %d", n, maxUsageScales)
	}
	k := scaleKey{"fresh", "m"}
	s.set(k, 6)
	if got := s.get(k); got != 6 || s.len() != maxUsageScales {
		t.Fatalf("a new tenant on a full table: scale %v, %d kept", got, s.len())
	}
	s.set(k, 3)
	if got := s.get(k); got != 3 {
		t.Fatalf("scale %v, want the last report, 3", got)
	}
	s.set(k, 1) // the model counts no more than the estimate: nothing to keep
	if got := s.get(k); got != 0 || s.len() != maxUsageScales-1 {
		t.Fatalf("after a scale of 1: scale %v, %d kept", got, s.len())
	}
	if got := s.get(scaleKey{"fresh", "other model"}); got != 0 {
		t.Fatalf("another model of the tenant: scale %v", got)
	}
}
