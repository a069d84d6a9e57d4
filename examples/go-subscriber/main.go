// Command go-subscriber reads pricing-ha's prices topic from Go, as docs/asyncapi.json says:
// read_committed, control records skipped, (epoch, seq) checked per instrument, staleness shown.
// At exit (idle for -idle, or SIGTERM/SIGINT) it prints one JSON line summarising what it saw.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// controlHeader marks a control record: no key and this header (any value) => not a price.
const controlHeader = "pricing-ha-control"

// price is the value of a price record (docs/schemas/price.json); epoch is 0 when absent.
type price struct {
	Instrument   string  `json:"instrument"`
	Epoch        int64   `json:"epoch"`
	Seq          int64   `json:"seq"`
	Bid          float64 `json:"bid"`
	Ask          float64 `json:"ask"`
	Mid          float64 `json:"mid"`
	SourceTimeNs int64   `json:"source_time_ns"`
}

// instrument is what the summary reports per instrument.
type instrument struct {
	Count          int64   `json:"count"`
	FirstSeq       int64   `json:"first_seq"`
	LastSeq        int64   `json:"last_seq"`
	Epoch          int64   `json:"epoch"`
	Gaps           int64   `json:"gaps"`
	Duplicates     int64   `json:"duplicates"`
	MaxStalenessMs float64 `json:"max_staleness_ms"`
}

type summary struct {
	Topic       string                 `json:"topic"`
	Prices      int64                  `json:"prices"`
	Controls    int64                  `json:"controls"`
	Invalid     int64                  `json:"invalid"`
	Gaps        int64                  `json:"gaps"`
	Duplicates  int64                  `json:"duplicates"`
	Instruments map[string]*instrument `json:"instruments"`
}

// onPrice checks (epoch, seq) against the instrument's last one: +1 in the same epoch is
// next, more is a gap, less or equal a duplicate (dropped); a later epoch restarts from seq 1.
// It returns the price's staleness in milliseconds.
func (s *summary) onPrice(p price, now time.Time) float64 {
	in, seen := s.Instruments[p.Instrument]
	if !seen {
		in = &instrument{FirstSeq: p.Seq, Epoch: p.Epoch, LastSeq: p.Seq - 1}
		s.Instruments[p.Instrument] = in
	}
	if p.Epoch < in.Epoch || (p.Epoch == in.Epoch && p.Seq <= in.LastSeq) {
		in.Duplicates++
		s.Duplicates++
		return 0
	}
	gap := p.Seq - in.LastSeq - 1
	if p.Epoch > in.Epoch {
		gap = p.Seq - 1
	}
	in.Gaps += gap
	s.Gaps += gap
	in.Epoch, in.LastSeq = p.Epoch, p.Seq
	in.Count++
	s.Prices++
	stale := float64(now.UnixNano()-p.SourceTimeNs) / 1e6
	in.MaxStalenessMs = max(in.MaxStalenessMs, stale)
	return stale
}

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	topic := flag.String("topic", "prices", "the prices topic")
	fromStart := flag.Bool("from-beginning", false, "start at the beginning, not the end")
	idle := flag.Duration("idle", 30*time.Second, "exit after this long without a price")
	every := flag.Duration("every", time.Second, "how often to print a status line (stderr)")
	flag.Parse()

	start := kgo.NewOffset().AtEnd()
	if *fromStart {
		start = kgo.NewOffset().AtStart()
	}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.ConsumeTopics(*topic), // no group: every partition, nothing committed
		kgo.ConsumeResetOffset(start),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // never a deposed relay's aborted records
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-subscriber:", err)
		os.Exit(2)
	}
	defer client.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	s := &summary{Topic: *topic, Instruments: map[string]*instrument{}}
	lastPrice, lastStatus, worst := time.Now(), time.Now(), 0.0 // worst: since the last status
	for ctx.Err() == nil && time.Since(lastPrice) < *idle {
		pollCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := client.PollFetches(pollCtx)
		cancel()
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "fetch %s[%d]: %v\n", t, p, err)
			}
		})
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			if kind, control := header(r, controlHeader); r.Key == nil && control {
				s.Controls++         // a relay's marker or checkpoint, or an operator's reset
				if kind == "reset" { // restart that instrument's seq check (and its counts)
					name, _ := header(r, "instrument")
					delete(s.Instruments, name)
				}
				return
			}
			var p price
			if err := json.Unmarshal(r.Value, &p); err != nil || p.Seq < 1 || string(r.Key) != p.Instrument {
				s.Invalid++
				return
			}
			worst = max(worst, s.onPrice(p, now))
			lastPrice = now
		})
		if now.Sub(lastStatus) >= *every {
			fmt.Fprintf(os.Stderr, "prices %d, instruments %d, gaps %d, duplicates %d, staleness up to %.1f ms\n",
				s.Prices, len(s.Instruments), s.Gaps, s.Duplicates, worst)
			lastStatus, worst = now, 0
		}
	}
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
}

// header returns the value of the record's header key, and whether it has one.
func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}
