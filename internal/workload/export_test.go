package workload

// DoubtForTest makes r's last acknowledged commit one whose COMMIT went
// unanswered, and adds a commit in doubt that never landed (the last one
// again under another tag and file).
func DoubtForTest(r *Result) {
	last := r.landed[len(r.landed)-1]
	r.landed = r.landed[:len(r.landed)-1]
	ghost := last
	ghost.Tag, ghost.File, ghost.Snapshot = "w99-c99", last.File+1000, last.Snapshot+1
	r.inDoubt = append(r.inDoubt, last, ghost)
}
