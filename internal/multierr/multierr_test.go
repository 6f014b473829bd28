package multierr

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJoin(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")

	require.NoError(t, Join())
	require.NoError(t, Join(nil, nil))

	require.Same(t, a, Join(a), "one error comes back as itself")
	require.Same(t, a, Join(nil, a, nil))

	err := Join(nil, a, b, nil, c)
	require.Equal(t, "a\nb\nc", err.Error(), "the first error leads, the others follow in order")
	for _, e := range []error{a, b, c} {
		require.ErrorIs(t, err, e)
	}
}
