package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// redisAddr is the Redis the tests may use ($REDIS_ADDR): without one the
// test is skipped, saying why, unless $THROTTLE_REQUIRE_REDIS is 1 (as
// under scripts/test.sh): then it fails.
func redisAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("REDIS_ADDR")
	switch {
	case addr != "":
		return addr
	case os.Getenv("THROTTLE_REQUIRE_REDIS") == "1":
		t.Fatal("REDIS_ADDR is not set, and THROTTLE_REQUIRE_REDIS=1: this test needs a Redis (scripts/test.sh starts one)")
	default:
		t.Skip("REDIS_ADDR is not set: this test needs a Redis (scripts/test.sh starts one)")
	}
	return ""
}

// TestFourProcessesShareOneQuota: four uploader processes, each configured
// at the whole quota of a 200/s token bucket, share it through Redis
// (-redis): the server refuses none of their 1,000 requests on a quiet
// machine, a few on a loaded one. Alone, the same four send four times too
// fast and are refused.
func TestFourProcessesShareOneQuota(t *testing.T) {
	addr := redisAddr(t)
	// The program itself, built without the race detector: four processes
	// of a race-built test binary on 2 cores, beside other packages' tests,
	// wake late enough to bunch their requests beyond a bucket's slack.
	bin := filepath.Join(t.TempDir(), "bulk-uploader")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	const procs, each, quotaRate, burst = 4, 250, 200, 20
	for _, shared := range []bool{true, false} {
		name := map[bool]string{true: "shared", false: "alone"}[shared]
		t.Run(name, func(t *testing.T) {
			srv := throttletest.NewServer(throttletest.Config{
				Limits:     []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: quotaRate, Burst: burst}},
				XRateLimit: true, Latency: 2 * time.Millisecond})
			defer srv.Close()
			args := []string{"-target", srv.URL, "-api-key", "demo", "-rate", fmt.Sprint(quotaRate),
				"-burst", fmt.Sprint(burst), "-n", fmt.Sprint(each), "-json"}
			if shared {
				args = append(args, "-redis", addr)
			}
			var kids []*exec.Cmd
			var outs, errs [procs]bytes.Buffer
			for i := range procs {
				c := exec.Command(bin, args...)
				c.Stdout, c.Stderr = &outs[i], &errs[i]
				require.NoError(t, c.Start())
				kids = append(kids, c)
			}
			wall := 0.0
			for i, c := range kids {
				require.NoError(t, c.Wait(), "process %d: %s", i, errs[i].String())
				var s summary
				require.NoError(t, json.Unmarshal(outs[i].Bytes(), &s), outs[i].String())
				assert.Equal(t, each, s.Uploaded, "process %d", i)
				if shared {
					assert.Equal(t, addr, s.SharedVia)
					assert.Zero(t, s.StoreAlone, "Redis answered throughout")
				}
				wall = max(wall, s.WallSecs)
			}
			seen := srv.API.Stats().Total
			ideal := ideal(procs*each, burst, quotaRate).Seconds()
			t.Logf("%s: the slowest took %.2fs, %.2f× the ideal %.2fs of the whole job; the server refused %d, at most %d accepted in a second",
				name, wall, wall/ideal, ideal, seen.Throttled, seen.PeakPerSecond)
			assert.EqualValues(t, procs*each, seen.Accepted)
			if shared {
				// Together within the quota. A quiet machine sees no
				// refusal; a loaded one (2 cores, four processes and
				// Redis beside the race-built tests of the other
				// packages) wakes a process late now and then, past what
				// the bucket's reserve absorbs, and 1-4 of the 1,000 were
				// refused in runs of this test there. Alone, the four are
				// refused tens to hundreds.
				assert.LessOrEqual(t, seen.Throttled, int64(procs*each/100), "together within the quota, but for at most 1%%")
			} else {
				assert.Positive(t, seen.Throttled, "the control: alone, each sends at the whole quota")
			}
		})
	}
}
