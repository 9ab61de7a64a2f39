package catalog

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
)

// TestTxnModel checks Txn against a map model: random inserts (some with
// duplicate keys), updates and deletes by key, commits, rollbacks and
// concurrent transactions. After every action the transaction's view must
// hold exactly the model's rows in ctid order; every pinned version must
// keep the contents it had; committing must equal replaying the ops on the
// base (Apply) whenever the base is still current.
//
// Seal is part of the model: a follower transaction pinned on the sealed
// version sees exactly the model at the seal, and when tx ends it commits a
// key of its own, which must land if and only if tx committed exactly the
// sealed writes on an unchanged base, and fail with a serialization error
// otherwise (leaving the current version untouched).
func TestTxnModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		db := NewServer(Options{}).Database("m")
		setupTx := db.Begin()
		if err := setupTx.CreateTable(snapDef()); err != nil {
			rt.Fatal(err)
		}
		if err := setupTx.Commit(ctx); err != nil {
			rt.Fatal(err)
		}
		committed := map[int64]string{} // the model of the current version
		type pin struct {
			v    *Version
			want map[int64]string
		}
		pins := []pin{{db.Current(), map[int64]string{}}}
		tx := db.Begin()
		model := map[int64]string{}  // the model of tx's view
		txBase := map[int64]string{} // committed when tx began
		copyMap := func(m map[int64]string) map[int64]string {
			c := make(map[int64]string, len(m))
			for k, v := range m {
				c[k] = v
			}
			return c
		}
		contents := func(v *Version) map[int64]string {
			tb, err := v.Table("public", "snap")
			if err != nil {
				rt.Fatal(err)
			}
			out := map[int64]string{}
			last := CTID(0)
			first := true
			tb.Scan(func(c CTID, r datum.Row) bool {
				if !first && c <= last {
					rt.Fatalf("scan out of ctid order: %s after %s", c, last)
				}
				first, last = false, c
				vals, err := r.Decode(tb.Types(), nil)
				if err != nil {
					rt.Fatal(err)
				}
				out[vals[0].Int()] = vals[1].Text()
				return true
			})
			return out
		}
		same := func(a, b map[int64]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
		keys := func() []int64 {
			var ks []int64
			for k := range model {
				ks = append(ks, k)
			}
			sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
			return ks
		}
		note := rapid.StringMatching(`[a-z]{0,3}|x{120,140}`)
		// follower is pinned on tx's sealed version; clean says tx has not
		// written since it sealed.
		var follower struct {
			tx     *Txn
			sealed *Version
			clean  bool
		}
		wrote := func() { follower.clean = false }
		// endTx resolves the follower once tx has ended.
		endTx := func(rt *rapid.T) {
			f := follower
			follower.tx = nil
			if f.tx == nil {
				return
			}
			landed := f.clean && db.Current() == f.sealed
			if f.sealed.Speculative() {
				rt.Fatal("tx ended but its sealed version is still undecided")
			}
			before := db.Current()
			id := rapid.Int64Range(300, 400).Draw(rt, "follower id")
			if _, ok := committed[id]; ok {
				f.tx.Rollback()
				return
			}
			if _, seen := contents(f.sealed)[id]; seen {
				// tx deleted id after sealing: the sealed version the
				// follower reads still holds it, so its insert is a
				// duplicate there, whatever became of tx.
				if _, err := f.tx.InsertRow("public", "snap", snapRow(id, "follower")); !errors.Is(err, ErrDuplicateKey) {
					rt.Fatalf("follower inserting a key its sealed version holds: %v", err)
				}
				f.tx.Rollback()
				return
			}
			if _, err := f.tx.InsertRow("public", "snap", snapRow(id, "follower")); err != nil {
				rt.Fatal(err)
			}
			err := f.tx.Commit(ctx)
			if !landed {
				if !errors.Is(err, ErrSerialization) {
					rt.Fatalf("follower of a sealed version that did not land: %v", err)
				}
				if db.Current() != before {
					rt.Fatal("a failed follower changed the current version")
				}
				return
			}
			if err != nil {
				rt.Fatalf("follower of a landed sealed version: %v", err)
			}
			committed[id] = "follower"
			pins = append(pins, pin{db.Current(), copyMap(committed)})
			model = copyMap(committed)
			txBase = copyMap(committed)
			tx.Rollback()
			tx = db.Begin()
		}
		rt.Repeat(map[string]func(*rapid.T){
			"insert": func(rt *rapid.T) {
				id := rapid.Int64Range(-15, 30).Draw(rt, "id")
				n := note.Draw(rt, "note")
				_, err := tx.InsertRow("public", "snap", snapRow(id, n))
				if _, dup := model[id]; dup {
					if !errors.Is(err, ErrDuplicateKey) {
						rt.Fatalf("insert of duplicate %d: %v", id, err)
					}
					return
				}
				if err != nil {
					rt.Fatal(err)
				}
				wrote()
				model[id] = n
			},
			"update": func(rt *rapid.T) {
				ks := keys()
				if len(ks) == 0 {
					rt.Skip("empty")
				}
				id := rapid.SampledFrom(ks).Draw(rt, "id")
				n := note.Draw(rt, "note")
				tb, _ := tx.Table("public", "snap")
				c, _, ok := tb.LookupKey([]datum.Value{datum.IntValue(id)})
				if !ok {
					rt.Fatalf("key %d not found", id)
				}
				if _, err := tx.UpdateRow("public", "snap", c, snapRow(id, n)); err != nil {
					rt.Fatal(err)
				}
				wrote()
				model[id] = n
			},
			"delete": func(rt *rapid.T) {
				ks := keys()
				if len(ks) == 0 {
					rt.Skip("empty")
				}
				id := rapid.SampledFrom(ks).Draw(rt, "id")
				tb, _ := tx.Table("public", "snap")
				c, _, _ := tb.LookupKey([]datum.Value{datum.IntValue(id)})
				if err := tx.DeleteRow("public", "snap", c); err != nil {
					rt.Fatal(err)
				}
				wrote()
				if _, _, ok := tb.LookupKey([]datum.Value{datum.IntValue(id)}); !ok {
					rt.Fatal("an earlier view lost a row")
				}
				delete(model, id)
			},
			"commit": func(rt *rapid.T) {
				base := tx.Base()
				var replay *Version
				if tx.Dirty() && base == db.Current() {
					var err error
					if replay, err = base.Apply(tx.Ops()); err != nil {
						rt.Fatal(err)
					}
				}
				view, _ := tx.Table("public", "snap")
				if err := tx.Commit(ctx); err != nil {
					rt.Fatal(err)
				}
				committed = copyMap(model)
				if replay != nil {
					rtb, _ := replay.Table("public", "snap")
					if strings.Join(dumpLines(rtb), ";") != strings.Join(dumpLines(view), ";") {
						rt.Fatal("Apply on the base differs from the transaction's view")
					}
				}
				pins = append(pins, pin{db.Current(), copyMap(committed)})
				tx = db.Begin()
				txBase = copyMap(committed)
				model = copyMap(committed)
				endTx(rt)
			},
			"rollback": func(rt *rapid.T) {
				tx.Rollback()
				tx = db.Begin()
				model = copyMap(committed)
				txBase = copyMap(committed)
				endTx(rt)
			},
			"seal": func(rt *rapid.T) {
				if follower.tx != nil {
					rt.Skip("sealed already")
				}
				v := tx.Seal()
				if !tx.Dirty() {
					if v != nil {
						rt.Fatal("a transaction without writes sealed a version")
					}
					return
				}
				if v == nil || !v.Speculative() || !v.Extends(tx.Base()) {
					rt.Fatalf("sealed %v: speculative and extending the base expected", v)
				}
				if tx.Seal() != v {
					rt.Fatal("sealing again without a write gave another version")
				}
				if got := contents(v); !same(got, model) {
					rt.Fatalf("sealed version %v, model %v", got, model)
				}
				follower.tx, follower.sealed, follower.clean = db.BeginOn(v), v, true
				if got := contents(follower.tx.View()); !same(got, model) {
					rt.Fatalf("follower sees %v, model %v", got, model)
				}
			},
			"other-commit": func(rt *rapid.T) {
				// A concurrent transaction inserts a fresh key and commits;
				// tx keeps its pinned view.
				id := rapid.Int64Range(100, 200).Draw(rt, "id")
				if _, ok := committed[id]; ok {
					rt.Skip("exists")
				}
				o := db.Begin()
				if _, err := o.InsertRow("public", "snap", snapRow(id, "other")); err != nil {
					rt.Fatal(err)
				}
				if err := o.Commit(ctx); err != nil {
					rt.Fatal(err)
				}
				committed[id] = "other"
				pins = append(pins, pin{db.Current(), copyMap(committed)})
				// tx's view is unchanged by the concurrent commit.
				if got := contents(tx.View()); !same(got, model) {
					rt.Fatalf("tx sees a concurrent commit: %v", got)
				}
				// tx commits on the newer version (Apply): its changes
				// relative to its base land on top of the other commit.
				if err := tx.Commit(ctx); err != nil {
					rt.Fatal(err)
				}
				for k := range txBase {
					if _, ok := model[k]; !ok {
						delete(committed, k)
					}
				}
				for k, v := range model {
					committed[k] = v
				}
				pins = append(pins, pin{db.Current(), copyMap(committed)})
				tx = db.Begin()
				model = copyMap(committed)
				txBase = copyMap(committed)
				endTx(rt)
			},
			"": func(rt *rapid.T) {
				if got := contents(tx.View()); !same(got, model) {
					rt.Fatalf("view %v, model %v", got, model)
				}
				// EdgeKey answers MIN/MAX of the key from the index, and
				// AscendKeyFrom walks the keys from any point in order.
				tb, _ := tx.Table("public", "snap")
				from := rapid.Int64Range(-20, 35).Draw(rt, "from")
				var want, got []int64
				for _, k := range keys() {
					if k >= from {
						want = append(want, k)
					}
				}
				if !tb.AscendKeyFrom(datum.IntValue(from), func(_ CTID, r datum.Row) bool {
					v, err := r.Column(tb.Types(), 0)
					if err != nil {
						rt.Fatal(err)
					}
					got = append(got, v.I)
					return true
				}) {
					rt.Fatal("AscendKeyFrom refused an integer key")
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					rt.Fatalf("AscendKeyFrom(%d) = %v, want %v", from, got, want)
				}
				for _, last := range []bool{false, true} {
					_, r, ok := tb.EdgeKey(last)
					ks := keys()
					if ok != (len(ks) > 0) {
						rt.Fatalf("EdgeKey(%v) ok=%v with %d rows", last, ok, len(ks))
					}
					if !ok {
						continue
					}
					vals, err := r.Decode(tb.Types(), nil)
					if err != nil {
						rt.Fatal(err)
					}
					want := ks[0]
					if last {
						want = ks[len(ks)-1]
					}
					if vals[0].Int() != want {
						rt.Fatalf("EdgeKey(%v) = %d, want %d", last, vals[0].Int(), want)
					}
				}
				if got := contents(db.Current()); !same(got, committed) {
					rt.Fatalf("current %v, committed %v", got, committed)
				}
				for i, p := range pins {
					if got := contents(p.v); !same(got, p.want) {
						rt.Fatalf("pinned version %d changed: %v, want %v", i, got, p.want)
					}
				}
			},
		})
	})
}

func dumpLines(tb *Table) []string {
	var out []string
	tb.Scan(func(c CTID, r datum.Row) bool {
		out = append(out, c.String()+":"+string(r))
		return true
	})
	return out
}
