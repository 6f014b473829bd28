package merger

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// BuilderOptions configure a Builder. The zero value is the default: no live bitmaps.
type BuilderOptions struct {
	// LiveBitmaps maintains a roaring bitmap per dimension value (of every dictionary dimension
	// with a bitmap index) as rows arrive, so that filters on rows not yet persisted use the
	// bitmaps instead of scanning every row. It costs some ingestion time and memory.
	LiveBitmaps bool
	// ScratchArrays keeps the row arrays of one number a row (times, single-value dimension
	// ids, long and double metric values and times) outside the Go heap, in anonymous
	// mappings (no zeroing by the allocator, nothing for the collector to pace on), pooled for
	// the next arrays. Such a builder must be closed (Close) to give the mappings back.
	ScratchArrays bool
}

// Builder takes rows into memory, answers queries on them (package merger/query), and persists
// them as a segment through the merge's write path. Its methods are safe for concurrent use:
// Add excludes queries and Persist, which may run together.
//
// Rows are stored as Druid's incremental index stores them: each dimension value interned in
// a dictionary, multi-value rows sorted by value (duplicates kept, as Druid's default
// SORTED_ARRAY handling), times truncated to the schema's granularity, and, when the schema
// says Rollup, a row whose truncated time and dimensions equal an earlier row's combined into
// it through the aggregators.
type Builder struct {
	mu     sync.RWMutex
	schema columns.Schema
	opts   BuilderOptions
	n      int
	times  []int64
	dims   []*bdim
	mets   []*bmet
	keys   map[string]uint32 // rollup: row key -> row
	keyBuf []byte
	sorted []string
	seen   []uint32
	// Scratch arrays (BuilderOptions.ScratchArrays): arrs owns times; room is the rows the
	// row arrays have room for (Add reserves more when it is 0); freeErr is the first error of
	// releasing one, for Close.
	arrs    rowArrays
	room    int
	freeErr error
	closed  bool
}

// bdim holds one dimension's rows.
type bdim struct {
	dim   columns.Dimension
	kind  dimKind
	index map[string]uint32 // value -> local id; local ids start at 1, 0 is null
	cache internCache       // in front of index (kindSingle and kindMulti)
	vals  []string          // local id -> value
	nulls int               // null rows
	ids   []uint32          // kindSingle: local id per row
	offs  []uint32          // kindMulti: row r's ids are multi[offs[r]:offs[r+1]]
	multi []uint32
	raw   []string  // kindRaw
	rawOK []bool    // kindRaw: false for null
	arrs  dimArrays // ids's owner with ScratchArrays
	// Live bitmaps: the rows of id wait in a slot of pendBatch rows (npend[id] of them) and go to
	// live[id] pendBatch at a time (AddMany of increasing rows appends to roaring's
	// containers), and before any reader looks at live[id] (liveBitmap). Flat arrays: no
	// allocation and no pointer a row.
	live  []*roaring.Bitmap
	big   []uint32   // slots of the first bigIDs ids (the values seen first, often the frequent ones)
	pend  [][]uint32 // blocks of pendIDs slots for the other ids: no copying as ids are added
	npend []uint8
	// wins[id]: the window of a frequent id (one of the first bigIDs whose slot filled with
	// rows of one container), which takes its rows from then on instead of the slot.
	wins []*liveWindow
	pmu  sync.Mutex // guards flushes by readers, which hold only the read lock
}

const pendBatch = 16

// The first bigIDs ids of a dimension get slots of bigBatch rows, the others of pendBatch:
// frequent values (most often seen early) go to their bitmaps in larger batches, and rare ones
// (of which there may be millions) hold little memory.
const (
	pendIDs  = 1024
	bigIDs   = 256
	bigBatch = 128
)

// bmet holds one metric's rows.
type bmet struct {
	met   columns.Metric
	agg   agg.Agg
	longs []int64
	dbls  []float64
	times []int64                  // first/last: the event time stored with each value
	sums  map[uint32]*agg.ExactSum // doubleSum: rows combined from several, exactly
	carry map[uint32]int64         // count, longSum: rows whose exact sum is longs[row] + carry*2^64
	nulls *roaring.Bitmap          // long and double metrics: the null rows (value and time 0), nil when none
	src   int                      // sketches: the dimension a row's own sketch derives from, or -1
	kind  agg.Sketches             // sketches: the metric's kind with its parameters
	sks   map[uint32]agg.Sketch    // sketches: the rows' own sketches
	arrs  metArrays                // the owners of longs, dbls and times with ScratchArrays
}

// NewBuilder returns an empty builder of rows of schema, which it validates.
func NewBuilder(schema columns.Schema, opts BuilderOptions) (*Builder, error) {
	if err := schema.Validate(); err != nil {
		return nil, fmt.Errorf("merger: builder: %w", err)
	}
	b := &Builder{schema: schema.Normalized(), opts: opts} // the footer form merges write too
	b.reset()
	return b, nil
}

func (b *Builder) reset() { b.resetKeep(0) }

// resetKeep drops every row. When the row arrays' capacity (arrayBytes) is at most keep bytes,
// they are kept, emptied, for the next rows; else they are dropped with the rest.
func (b *Builder) resetKeep(keep int64) {
	old, oldMets, times := b.dims, b.mets, b.times
	reuse := keep > 0 && b.arrayBytes() <= keep
	if !reuse {
		b.freeArrays(old, oldMets) // nothing holds them: callers hold the write lock
		old, oldMets, times = nil, nil, nil
		b.arrs = rowArrays{}
	}
	b.n, b.room = 0, 0
	b.times = times[:0]
	b.dims = make([]*bdim, len(b.schema.Dimensions))
	for i, d := range b.schema.Dimensions {
		bd := &bdim{dim: d}
		if old != nil {
			o := old[i]
			clear(o.vals) // let the values and raw strings go
			clear(o.raw)
			bd.ids, bd.offs, bd.multi, bd.raw, bd.rawOK, bd.vals = o.ids[:0], o.offs[:0], o.multi[:0], o.raw[:0], o.rawOK[:0], o.vals[:0]
			bd.arrs = o.arrs
			bd.cache = o.cache
			bd.cache.reset()
		}
		switch {
		case d.Raw:
			bd.kind = kindRaw
		case d.MultiValue:
			bd.kind = kindMulti
			bd.offs = append(bd.offs, 0)
		default:
			bd.kind = kindSingle
		}
		if bd.kind != kindRaw {
			bd.index = map[string]uint32{}
			bd.vals = append(bd.vals, "")
			if b.liveBitmaps(bd) {
				bd.newLive() // null, id 0
			}
		}
		b.dims[i] = bd
	}
	b.mets = make([]*bmet, len(b.schema.Metrics))
	for i, m := range b.schema.Metrics {
		bm := &bmet{met: m, agg: m.Agg(), src: -1}
		if oldMets != nil {
			o := oldMets[i]
			bm.longs, bm.dbls, bm.times = o.longs[:0], o.dbls[:0], o.times[:0]
			bm.arrs = o.arrs
		}
		if bm.agg.Kind == agg.Union {
			field := m.Field
			if field == "" {
				field = m.Name
			}
			if k := b.schema.Dimension(field); k >= 0 {
				bm.src = k
			}
			bm.sks = map[uint32]agg.Sketch{}
			bm.kind, _ = m.Sketches() // the schema is validated
		}
		b.mets[i] = bm
	}
	b.keys = nil
	if b.schema.Rollup {
		b.keys = map[string]uint32{}
	}
}

// Grow reserves room in the row arrays for n more rows, as slices.Grow does: rows added up to
// that many then fill them instead of growing them step by step, each step a copy into fresh
// memory. MemBytes counts the room reserved (arrays count by capacity). Multi-value
// dimensions reserve one value a row.
func (b *Builder) Grow(n int) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.reserveRows(n)
	}
}

// arrayBytes is the capacity of the row arrays, in bytes (the mappings' lengths of those in
// scratch memory): the memory ResetKeep can keep.
func (b *Builder) arrayBytes() int64 {
	const strHeader = 16
	n := ownedBytes(b.times, b.timesOwner(), 8)
	for _, d := range b.dims {
		n += ownedBytes(d.ids, b.idsOwner(d), 4) + int64(cap(d.offs)+cap(d.multi))*4 + int64(cap(d.raw)+cap(d.vals))*strHeader + int64(cap(d.rawOK))
	}
	for _, m := range b.mets {
		n += b.metBytes(m)
	}
	return n
}

// metBytes is the memory of a metric's row arrays.
func (b *Builder) metBytes(m *bmet) int64 {
	longs, dbls, times := b.metOwners(m)
	return ownedBytes(m.longs, longs, 8) + ownedBytes(m.dbls, dbls, 8) + ownedBytes(m.times, times, 8)
}

func (b *Builder) liveBitmaps(d *bdim) bool {
	return b.opts.LiveBitmaps && d.kind != kindRaw && !d.dim.NoBitmapIndex
}

// Schema returns the builder's schema.
func (b *Builder) Schema() columns.Schema { return b.schema.Clone() }

// Rows returns the number of rows held (after rollup).
func (b *Builder) Rows() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.n
}

// Reset drops every row, keeping the schema and options: a builder can take the next batch of
// rows after Persist. It lets go of all the memory the rows held.
func (b *Builder) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reset()
}

// Close releases the builder's memory, its scratch arrays included (BuilderOptions.ScratchArrays):
// its rows are dropped as by Reset, and it takes no more. Add and Persist then return an error
// wrapping medium.ErrClosed; queries see no rows. It waits for queries and Persist under way.
// Its error is the first failure to release scratch memory met over the builder's life; a
// second Close does nothing and returns nil.
func (b *Builder) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.reset()
	b.closed = true
	err := b.freeErr
	b.freeErr = nil
	return err
}

// ResetKeep is Reset keeping the row arrays (times, dimension ids, metric values: the bulk of
// a builder without rollup), emptied, for the next rows, when their capacity is at most
// maxBytes; else it is Reset. Rows added then fill the kept arrays instead of growing new
// ones, which saves the copies of growing and the page faults of fresh memory. MemBytes
// counts the arrays by capacity, so the memory kept is counted from the moment it is kept:
// a caller that persists when MemBytes passes a limit should keep at most part of it
// (ingestion keeps at most 7/8 of its limit, so that a kept builder has room for the
// dictionaries of at least some rows before it is full again).
func (b *Builder) ResetKeep(maxBytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.resetKeep(maxBytes)
}

// Add adds one row. Dims holds one entry per schema dimension (nil or empty for null; at most
// one value for a single-value dimension), Metrics one per schema metric. The builder copies
// the values of dictionary dimensions it has not seen before, and keeps raw dimensions'
// values as they are given: a raw value that is a slice of a larger string (a CSV record)
// keeps that string alive until Reset.
//   - count metrics count the rows added (Value is ignored);
//   - long and double metrics take Long or Double;
//   - hyperUnique metrics merge Value.Sketch when it is set; otherwise, when the metric's
//     Field (or, when empty, its Name) names a dimension of the schema, the row's values of
//     that dimension are added to the sketch (Druid's hyperUnique over a dimension);
//     otherwise the row's sketch is empty.
//
// A bad row is an error wrapping ErrInvalid and leaves the builder unchanged.
func (b *Builder) Add(r columns.Row) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.add(&r)
}

// AddRows adds rows in order, each as Add adds it, under one acquisition of the builder's lock
// (a lock and an unlock a row cost ingestion a tenth of a second for 3,000,000 rows). It
// returns how many rows it added: all of them, or those before the first bad row, whose error
// it returns (that row and the ones after it are not added).
func (b *Builder) AddRows(rows []columns.Row) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range rows {
		if err := b.add(&rows[i]); err != nil {
			return i, err
		}
	}
	return len(rows), nil
}

// add is Add under the write lock.
func (b *Builder) add(r *columns.Row) error {
	if b.closed {
		return fmt.Errorf("merger: builder: add: %w", medium.ErrClosed)
	}
	if len(r.Dims) != len(b.dims) || len(r.Metrics) != len(b.mets) {
		return fmt.Errorf("%w: builder: row has %d dimensions and %d metrics, the schema %d and %d",
			ErrInvalid, len(r.Dims), len(r.Metrics), len(b.dims), len(b.mets))
	}
	for i, vals := range r.Dims {
		d := b.dims[i]
		if len(vals) > 1 && d.kind != kindMulti {
			return fmt.Errorf("%w: builder: dimension %q: %d values in a single-value dimension", ErrInvalid, d.dim.Name, len(vals))
		}
		for _, v := range vals {
			if len(v) > columns.MaxValueBytes {
				return fmt.Errorf("%w: builder: dimension %q: value of %d bytes, at most %d", ErrInvalid, d.dim.Name, len(v), columns.MaxValueBytes)
			}
		}
	}
	if b.n >= math.MaxUint32-1 {
		return fmt.Errorf("%w: builder: full (%d rows)", ErrInvalid, b.n)
	}
	if r.Time < columns.MinTime || r.Time > columns.MaxTime {
		return fmt.Errorf("%w: builder: time %d outside [columns.MinTime, columns.MaxTime] = [%d, %d]: %w",
			ErrInvalid, r.Time, columns.MinTime, columns.MaxTime, columns.ErrInvalid)
	}
	t := b.schema.Granularity.Truncate(r.Time)
	row := uint32(b.n)
	if b.keys != nil {
		key := b.rowKey(t, *r)
		if old, ok := b.keys[string(key)]; ok {
			return b.combine(old, *r)
		}
		b.keys[string(key)] = row
	}
	if b.opts.ScratchArrays {
		// Scratch arrays are never grown by append (it would copy them to the Go heap).
		if b.room == 0 {
			b.reserveRows(max(b.n, minReserveRows))
		}
		b.room--
	}
	b.n++
	b.times = append(b.times, t)
	for i, vals := range r.Dims {
		b.addDim(b.dims[i], row, vals)
	}
	for i, m := range b.mets {
		v := m.input(r.Metrics[i])
		if v.Null {
			v.Long, v.Double = 0, 0
			if m.nulls == nil {
				m.nulls = roaring.New()
			}
			m.nulls.Add(row)
		}
		switch m.agg.Type {
		case agg.Long:
			m.longs = append(m.longs, v.Long)
		case agg.Double:
			m.dbls = append(m.dbls, v.Double)
		case agg.SketchType:
			if v.Sketch != nil {
				m.sks[row] = v.Sketch.Clone() // one row's sketch: stored as it came
			}
		}
		if m.agg.Timed() {
			t := r.Time
			if v.Null {
				t = 0 // a null's time, as agg stores it
			}
			m.times = append(m.times, t)
		}
	}
	return nil
}

// input returns the value a row gives metric m: count counts the row (1, never null); a
// sketch has no null.
func (m *bmet) input(v columns.Value) columns.Value {
	switch {
	case m.agg.CountsRows:
		return columns.Value{Long: 1}
	case m.agg.Type == agg.SketchType:
		v.Null = false
	}
	return v
}

// isNull reports whether stored row holds null.
func (m *bmet) isNull(row uint32) bool { return m.nulls != nil && m.nulls.Contains(row) }

// setNull records whether stored row holds null.
func (m *bmet) setNull(row uint32, null bool) {
	switch {
	case null && m.nulls == nil:
		m.nulls = roaring.New()
		m.nulls.Add(row)
	case null:
		m.nulls.Add(row)
	case m.nulls != nil:
		m.nulls.Remove(row)
	}
}

func (b *Builder) addDim(d *bdim, row uint32, vals []string) {
	switch d.kind {
	case kindRaw:
		if len(vals) == 0 {
			d.raw = append(d.raw, "")
			d.rawOK = append(d.rawOK, false)
			d.nulls++
		} else {
			d.raw = append(d.raw, vals[0])
			d.rawOK = append(d.rawOK, true)
		}
		return
	case kindSingle:
		id := uint32(0)
		if len(vals) == 1 {
			id = d.intern(vals[0], b.liveBitmaps(d))
		} else {
			d.nulls++
		}
		d.ids = append(d.ids, id)
		if d.live != nil {
			d.addLive(id, row)
		}
		return
	case kindMulti: // below
	}
	if len(vals) == 0 {
		d.nulls++
		d.multi = append(d.multi, 0)
		d.offs = append(d.offs, uint32(len(d.multi)))
		if d.live != nil {
			d.addLive(0, row)
		}
		return
	}
	if len(vals) > 1 && !sort.StringsAreSorted(vals) {
		b.sorted = append(b.sorted[:0], vals...)
		sort.Strings(b.sorted)
		vals = b.sorted
	}
	start := len(d.multi)
	for _, v := range vals {
		d.multi = append(d.multi, d.intern(v, d.live != nil))
	}
	d.offs = append(d.offs, uint32(len(d.multi)))
	if d.live != nil {
		ids := d.multi[start:]
		for k, id := range ids {
			if k > 0 && vals[k] == vals[k-1] {
				continue // a duplicate value: the row is in its bitmap already
			}
			d.addLive(id, row)
		}
	}
}

func (d *bdim) intern(v string, live bool) uint32 {
	id, s, ok := d.cache.get(v)
	if ok {
		return id
	}
	id, ok = d.index[v]
	if ok {
		d.cache.put(s, d.vals[id], id)
	} else {
		// A copy: the value does not keep the larger string it may be a slice of (a CSV
		// record) alive, and the dictionary's values sit together in memory rather than
		// scattered over every record that brought a new one.
		v = strings.Clone(v)
		id = uint32(len(d.vals))
		d.index[v] = id
		d.vals = append(d.vals, v)
		d.cache.put(s, v, id)
		d.cache.fit(len(d.vals))
		if live {
			d.newLive()
		}
	}
	return id
}

// rowIDs returns the local ids of row (the null id 0 alone for a null row).
func (d *bdim) rowIDs(row int) []uint32 {
	if d.kind == kindSingle {
		return d.ids[row : row+1]
	}
	return d.multi[d.offs[row]:d.offs[row+1]]
}

// MemBytes returns an estimate of the memory the builder's rows hold, in bytes: its row arrays
// (by capacity; those in scratch memory by their mappings' lengths), dictionaries, raw values, rollup keys, exact double sums, sketches and live
// bitmaps. It is an estimate, not a measurement: string lengths are sampled (at most 64 values
// a dimension), map entries and sketches count at a fixed size, and memory a caller's strings
// share with other data it holds (a line the value was cut from) is not seen. It costs
// O(dimensions + metrics), not O(rows), so that ingestion can call it every few thousand rows
// to decide when to persist.
func (b *Builder) MemBytes() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	const (
		strHeader   = 16  // a string header
		mapEntry    = 48  // a map entry of a string key and an id, with the table's slack
		sketchBytes = 256 // a small sparse HyperLogLog sketch and its map entry
		sumBytes    = 96  // an exactSum and its map entry
		bitmapBytes = 64  // an empty roaring.Bitmap
	)
	// avgLen is the mean length of vals, from at most 64 of them spread evenly.
	avgLen := func(vals []string) int64 {
		if len(vals) == 0 {
			return 0
		}
		step := max(len(vals)/64, 1)
		var sum, k int64
		for i := 0; i < len(vals); i += step {
			sum += int64(len(vals[i]))
			k++
		}
		return (sum + k - 1) / k
	}
	n := ownedBytes(b.times, b.timesOwner(), 8) + int64(cap(b.keyBuf)) + int64(cap(b.sorted))*strHeader + int64(cap(b.seen))*4
	rows := int64(max(b.n, 1))
	key := int64(8) // a rollup key's bytes: the time, then each dimension's values
	for _, d := range b.dims {
		n += ownedBytes(d.ids, b.idsOwner(d), 4) + int64(cap(d.offs)+cap(d.multi))*4 + int64(cap(d.raw))*strHeader + int64(cap(d.rawOK))
		var perRow, avg int64 // values a row, mean length
		switch d.kind {
		case kindRaw:
			avg, perRow = avgLen(d.raw), 1
			n += avg * int64(len(d.raw))
		case kindSingle, kindMulti:
			avg = avgLen(d.vals[1:])
			// (The intern cache in front of the index is left out: at most 96 KiB a
			// dimension, whatever the rows, it would make a Builder under a small limit spill
			// its runs at a few rows each.)
			n += int64(cap(d.vals))*strHeader + avg*int64(len(d.vals)-1) + int64(len(d.index))*mapEntry
			perRow = 1
			if d.kind == kindMulti {
				perRow = (int64(len(d.multi)) + rows - 1) / rows
			}
		}
		key += 1 + perRow*(1+avg)
		if d.live != nil {
			n += int64(cap(d.live))*8 + int64(cap(d.npend)) + int64(cap(d.big))*4 + int64(len(d.pend))*pendIDs*pendBatch*4 +
				int64(cap(d.wins))*8 + int64(len(d.live))*bitmapBytes + 2*perRow*int64(b.n)
			for _, w := range d.wins {
				if w != nil {
					n += int64(len(w.words)) * 8
				}
			}
		}
	}
	if b.keys != nil {
		n += int64(len(b.keys)) * (mapEntry + key)
	}
	for _, m := range b.mets {
		n += b.metBytes(m) + int64(len(m.sums))*sumBytes + int64(len(m.sks))*sketchBytes
		if m.nulls != nil {
			n += int64(m.nulls.GetSizeInBytes())
		}
	}
	return n
}
