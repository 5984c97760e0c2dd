package cluster

import (
	"testing"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// startRedis starts the Redis a test runs against: one redis-server, or,
// while TestOnRedisCluster runs it, a Redis Cluster of three primaries.
var startRedis = redistest.Start

// TestOnRedisCluster runs the tests of what instances share against a
// Redis Cluster of three primaries, unchanged: every script and
// transaction touches keys of one hash tag, and a purge reaches the
// instances whichever node they listen on.
func TestOnRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	defer func() { startRedis = redistest.Start }()
	startRedis = redistest.StartCluster
	for name, test := range map[string]func(*testing.T){
		"SubscriptionsOneQueryForTheCluster":                 TestSubscriptionsOneQueryForTheCluster,
		"SubscriptionsForgetReachesEveryInstance":            TestSubscriptionsForgetReachesEveryInstance,
		"SpillLinkMintedOnOneInstanceTakenOnAnotherOnce":     TestSpillLinkMintedOnOneInstanceTakenOnAnotherOnce,
		"OAuthSignInBegunOnOneInstanceCompletesOnAnother":    TestOAuthSignInBegunOnOneInstanceCompletesOnAnother,
		"QueueSharedByInstancesKeepsEachOrganizationInOrder": TestQueueSharedByInstancesKeepsEachOrganizationInOrder,
		"QueueDeadLettersReplayAndDrop":                      TestQueueDeadLettersReplayAndDrop,
		"QueueAddCalledTwiceStoresOnce":                      TestQueueAddCalledTwiceStoresOnce,
		"InstallationsSharedByInstances":                     TestInstallationsSharedByInstances,
		"InstallationsRenewalDoesNotBringBackRemoved":        TestInstallationsRenewalDoesNotBringBackRemoved,
	} {
		t.Run(name, test)
	}
}
