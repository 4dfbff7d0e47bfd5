package engine

// Rows builds the n results of a list query from its rows, row(i) mapping
// the i-th: the one shape of every list an engine returns. A query error
// (err) comes back translated, with no rows.
func Rows[T any](n int, err error, translate func(error) error, row func(i int) T) ([]T, error) {
	if err != nil {
		return nil, translate(err)
	}
	out := make([]T, n)
	for i := range out {
		out[i] = row(i)
	}
	return out, nil
}

// RowsErr is Rows for a mapping that can fail (a stored list that does not
// parse): the first failure is the error, with no rows.
func RowsErr[T any](n int, err error, translate func(error) error, row func(i int) (T, error)) ([]T, error) {
	if err != nil {
		return nil, translate(err)
	}
	out := make([]T, n)
	for i := range out {
		if out[i], err = row(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}
