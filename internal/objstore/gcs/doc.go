// Package gcs opens Google Cloud Storage buckets (gs:// URLs) as an
// objstore.Store, through gocloud.dev/blob/gcsblob. It is compiled only with
// the build tag "gcs" (go build -tags gcs), so default builds do not link
// the Google Cloud client libraries.
//
// URL form: gs://bucket/prefix[?anonymous=true|access_id=…|private_key_path=…]
// — the path is the key prefix; the query goes to gcsblob unchanged.
// Credentials come from Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud, metadata server);
// STORAGE_EMULATOR_HOST points the client at an emulator.
//
// PutIfAbsent is a write with the DoesNotExist precondition (HTTP 412 on
// conflict → objstore.ErrExists), atomic for every client of the bucket.
// This backend is compile-checked; no GCS endpoint is reachable where
// moraine is tested, so it has not run against a server.
package gcs
