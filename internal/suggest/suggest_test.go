package suggest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClosest(t *testing.T) {
	cols := []string{"time", "page", "language", "origin", "delay", "distance"}
	for _, c := range []struct{ word, want string }{
		{"orign", "origin"}, // a deletion
		{"tiem", "time"},    // a transposition
		{"langauge", "language"},
		{"Page", "page"}, // case only
		{"dleay", "delay"},
		{"distnace", "distance"},
		{"page", ""}, // itself: nothing to suggest
		{"zzzz", ""}, // nothing near
		{"x", ""},
		{"destination", ""}, // distance 6 from "distance"
	} {
		assert.Equal(t, c.want, Closest(c.word, cols), c.word)
	}
	assert.Equal(t, "longSum", Closest("longSumm", []string{"count", "longSum", "longMin", "doubleSum"}))
	assert.Equal(t, "", Closest("anything", nil))
}

func TestHint(t *testing.T) {
	assert.Equal(t, `; did you mean "origin"?`, Hint("orign", []string{"origin"}))
	assert.Equal(t, "", Hint("qqq", []string{"origin"}))
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1},
		{"ca", "abc", 3}, {"héllo", "hello", 1}, {"flaw", "lawn", 2},
	} {
		assert.Equal(t, c.d, distance(c.a, c.b, 100), "%q %q", c.a, c.b)
		assert.Equal(t, c.d, distance(c.b, c.a, 100), "%q %q", c.b, c.a)
	}
	assert.Equal(t, 2, distance("kitten", "sitting", 2), "capped at max")
}

func FuzzDistance(f *testing.F) {
	f.Add("kitten", "sitting")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := distance(a, b, 1<<30)
		assert.Equal(t, d, distance(b, a, 1<<30))
		la, lb := len([]rune(a)), len([]rune(b))
		assert.LessOrEqual(t, d, max(la, lb))
		assert.GreaterOrEqual(t, d, max(la-lb, lb-la))
		if a == b {
			assert.Zero(t, d)
		}
	})
}

func TestJSONField(t *testing.T) {
	type inner struct {
		MultiValue bool   `json:"multiValue,omitempty"`
		Skip       string `json:"-"`
	}
	type outer struct {
		Dimensions []inner `json:"dimensions"`
		Granular   string
		Self       *outer `json:"self"`
	}
	dec := func(s string) error {
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		return d.Decode(&outer{})
	}
	err := dec(`{"dimension": []}`)
	require.Error(t, err)
	assert.Equal(t, `; did you mean "dimensions"?`, JSONField(err, outer{}))
	assert.Equal(t, `; did you mean "multiValue"?`, JSONField(dec(`{"dimensions": [{"multiValu": true}]}`), &outer{}))
	assert.Equal(t, `; did you mean "Granular"?`, JSONField(fmt.Errorf("spec: %w", dec(`{"granulr": 1}`)), outer{}))
	assert.Equal(t, "", JSONField(dec(`{"Skip": 1}`), outer{}), "a field json skips is no candidate (and Skip is far from every other)")
	assert.Equal(t, "", JSONField(dec(`{"dimensions": 1}`), outer{}), "not an unknown field")
	assert.Equal(t, "", JSONField(errors.New("other"), outer{}))
}
