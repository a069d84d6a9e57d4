package main

import (
	"testing"
	"time"
)

// TestOnPrice checks the per-instrument (epoch, seq) rule: next, gap, duplicate, new epoch.
func TestOnPrice(t *testing.T) {
	s := &summary{Instruments: map[string]*instrument{}}
	now := time.Unix(100, 0)
	for _, step := range []struct{ epoch, seq int64 }{
		{5, 7}, {5, 8}, {5, 11}, {5, 11}, {5, 9}, {4, 12}, {6, 3}, {6, 4},
	} {
		s.onPrice(price{Instrument: "X", Epoch: step.epoch, Seq: step.seq, SourceTimeNs: 99e9}, now)
	}
	got := *s.Instruments["X"]
	want := instrument{Count: 5, FirstSeq: 7, LastSeq: 4, Epoch: 6, Gaps: 2 + 2, Duplicates: 3, MaxStalenessMs: 1000}
	if got != want || s.Prices != 5 || s.Gaps != 4 || s.Duplicates != 3 {
		t.Fatalf("got %+v (prices %d, gaps %d, duplicates %d), want %+v", got, s.Prices, s.Gaps, s.Duplicates, want)
	}
}
