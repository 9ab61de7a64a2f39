package replay

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/shapes from the fixtures")

// fixturesDir locates the captured conversations (FixturesDir).
func fixturesDir(t *testing.T) string {
	t.Helper()
	dir, err := FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var fixtures struct {
	once sync.Once
	trs  []*Transcript
	err  error
}

// loadFixtures loads every fixture once per test binary; tests only read
// the transcripts (mutations work on clones).
func loadFixtures(t *testing.T) []*Transcript {
	t.Helper()
	dir := fixturesDir(t)
	fixtures.once.Do(func() { fixtures.trs, fixtures.err = LoadDir(dir) })
	if fixtures.err != nil {
		t.Fatal(fixtures.err)
	}
	return fixtures.trs
}

// fixture returns one loaded fixture by name.
func fixture(t *testing.T, name string) *Transcript {
	t.Helper()
	for _, tr := range loadFixtures(t) {
		if tr.Name == name {
			return tr
		}
	}
	t.Fatalf("fixture %s not found", name)
	return nil
}

const shapesDir = "../../testdata/shapes"

// TestInventory regenerates the statement-shape inventory from the fixtures
// and requires it to equal the committed testdata/shapes files.
func TestInventory(t *testing.T) {
	trs := loadFixtures(t)
	shapes, err := ExtractShapes(trs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tr := range trs {
		names = append(names, "`"+tr.Name+"`")
	}
	md := RenderInventory(shapes, names)
	js, err := MarshalInventory(shapes)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"inventory.md": md, "shapes.json": js}
	for name, want := range files {
		path := filepath.Join(shapesDir, name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go test ./internal/replay -run TestInventory -update", path)
		}
	}
	// The committed JSON reads back to the same shapes.
	back, err := ReadInventory(filepath.Join(shapesDir, "shapes.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(shapes) {
		t.Fatalf("ReadInventory: %d shapes, want %d", len(back), len(shapes))
	}
	for i := range back {
		if back[i].Fingerprint != shapes[i].Fingerprint || back[i].Count != shapes[i].Count {
			t.Fatalf("shape %d: read back %s×%d, want %s×%d", i, back[i].Fingerprint, back[i].Count, shapes[i].Fingerprint, shapes[i].Count)
		}
	}
}
