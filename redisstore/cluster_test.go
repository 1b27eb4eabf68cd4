package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
	"github.com/throttlehttp/throttle/storetest"
)

// TestCluster runs the suite through a Redis Cluster client, on a cluster
// of one node that holds every slot: the node refuses a script whose keys
// do not hash to one slot (CROSSSLOT), so the hash tags are checked by
// Redis itself.
func TestCluster(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, "--cluster-enabled", "yes", "--dir", dir,
		"--cluster-config-file", dir+"/nodes.conf")
	ctx := context.Background()
	node := newClient(t, srv.addr)
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(node.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("the cluster of one node is not ok after 10s")
		}
		time.Sleep(20 * time.Millisecond) // the node taking its slots
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })

	// The check is Redis's: keys of two slots in one script are refused.
	err := c.Eval(ctx, "return 1", []string{"a", "b"}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("a script of keys in two slots: %v, want CROSSSLOT", err)
	}
	storetest.Run(t, func(t *testing.T) throttle.Store {
		return redisstore.New(c, redisstore.WithPrefix(prefix(t)), redisstore.FailClosed())
	}, storetest.RealClock)
}
