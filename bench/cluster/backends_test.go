package cluster

import (
	"testing"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// startRedis starts the Redis the instances share: one redis-server, or,
// while TestClusterOnRedisCluster runs a test, a Redis Cluster of three
// primaries.
var startRedis = redistest.Start

// TestClusterOnRedisCluster runs the cluster suite's tests again, unchanged,
// with the instances sharing a Redis Cluster of three primaries
// (servicegate { redis_cluster … }).
func TestClusterOnRedisCluster(t *testing.T) {
	defer func() { startRedis = redistest.Start }()
	startRedis = redistest.StartCluster
	for _, test := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"OneQueryFor500ConcurrentFirstRequests", TestClusterOneQueryFor500ConcurrentFirstRequests},
		{"PurgeOnOneInstanceReachesTheOther", TestClusterPurgeOnOneInstanceReachesTheOther},
		{"SpillLinkMintedOnOneInstanceDownloadsOnTheOtherOnce", TestClusterSpillLinkMintedOnOneInstanceDownloadsOnTheOtherOnce},
		{"SignInAlternatingInstances", TestClusterSignInAlternatingInstances},
	} {
		t.Run(test.name, test.run)
	}
}
