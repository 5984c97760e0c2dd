package main

import (
	"testing"

	"github.com/servicegate/servicegate/internal/testdirs"
)

// TestMain gives the tests a data and config directory of their own.
func TestMain(m *testing.M) { testdirs.Run(m, "servicegate-cmd-test-") }
