package agent

import "sync"

// maxUsageScales bounds the scales an orchestrator keeps: one per
// (tenant, model) whose model last reported more input tokens than the
// estimate. When it is full, a new one replaces an arbitrary one, so a
// server running for months with ever new tenants does not grow.
const maxUsageScales = 4096

// usageScales remembers, per (tenant, model), how many times its own
// estimate the input count the model last reported was (reported input ÷
// estimated input, more than 1): a run with a token or cost budget starts
// planning from it (meter.scale), and each call's report replaces it. Per
// tenant, so one tenant's text (CJK, emoji, which the estimate counts
// short) does not shape another's planning. A scale of 1 (the model counts
// no more than the estimate) is not kept: an unknown key means 1.
//
// Only runs with a token or cost budget read or write it: a run without
// one never touches it.
type usageScales struct {
	mu sync.Mutex
	m  map[scaleKey]float64
}

// scaleKey names whose model's counting a scale describes.
type scaleKey struct{ tenant, model string }

// get returns the last scale kept for k, 0 when none (as meter.scale).
func (s *usageScales) get(k scaleKey) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

// set keeps v as the last scale of k: a v of at most 1 removes it.
func (s *usageScales) set(k scaleKey, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v <= 1 {
		delete(s.m, k)
		return
	}
	if s.m == nil {
		s.m = make(map[scaleKey]float64)
	}
	if _, ok := s.m[k]; !ok && len(s.m) >= maxUsageScales {
		for old := range s.m { // an arbitrary one: map order is not fixed
			delete(s.m, old)
			break
		}
	}
	s.m[k] = v
}

// len returns how many scales are kept.
func (s *usageScales) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
