package medium_test

import (
	"testing"

	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/medium/mediumtest"
)

func TestHeapConformance(t *testing.T) {
	mediumtest.Run(t, func(t *testing.T) medium.Medium { return medium.NewHeap() })
}
