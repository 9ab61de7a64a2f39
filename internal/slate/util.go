package slate

import (
	"errors"

	"github.com/moraine-db/moraine/internal/objstore"
)

func isNotFound(err error) bool { return errors.Is(err, objstore.ErrNotFound) }
