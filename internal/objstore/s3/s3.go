// Package s3 opens S3 and S3-compatible object stores (MinIO, Ceph, R2,
// gofakes3 in tests) as an objstore.Store, through gocloud.dev/blob/s3blob
// and the AWS SDK v2.
//
// URL form:
//
//	s3://bucket[/prefix]?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true
//
// Query parameters (all optional; unknown ones are an error, so a typo
// cannot silently select AWS proper):
//
//	endpoint          base URL of an S3-compatible server; default AWS
//	region            signing region; default from the AWS chain, else us-east-1
//	use_path_style    true: http://host/bucket/key instead of http://bucket.host/key
//	anonymous         true: send unsigned requests (test servers, public buckets)
//	request_checksum  when_supported (SDK default) or when_required, for servers
//	                  that reject the SDK's default CRC trailers
//
// Credentials come from the standard AWS chain: AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, shared config and credentials
// files (AWS_PROFILE), web identity, then instance metadata. They are never
// taken from the URL.
//
// PutIfAbsent sends If-None-Match: * and is atomic on AWS S3 and on servers
// that implement conditional writes. Objects below the SDK's multipart
// threshold (16 MiB) go up in one PUT; larger ones are multipart and rely on
// the server honouring If-None-Match on CompleteMultipartUpload, which AWS
// does and gofakes3 does not.
package s3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/smithy-go/logging"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"github.com/moraine-db/moraine/internal/objstore/blobstore"
)

// Scheme is the URL scheme this package opens.
const Scheme = "s3"

// DefaultRegion is used when neither the URL nor the AWS chain names one.
const DefaultRegion = "us-east-1"

// Config describes one S3 store.
type Config struct {
	Bucket string
	// Prefix is prepended to every key; it is empty or ends with "/".
	Prefix string
	// Endpoint is the base URL of an S3-compatible server; empty means AWS.
	Endpoint     string
	Region       string
	UsePathStyle bool
	// Anonymous sends unsigned requests.
	Anonymous bool
	// Credentials, if set, replaces the default AWS credential chain (tests
	// use static credentials this way).
	Credentials aws.CredentialsProvider
	// RequestChecksum overrides the SDK's request checksum behaviour.
	RequestChecksum aws.RequestChecksumCalculation
}

// String renders c as a URL that ParseURL reads back (credentials are not
// part of it).
func (c Config) String() string {
	u := url.URL{Scheme: Scheme, Host: c.Bucket, Path: "/" + c.Prefix}
	q := url.Values{}
	if c.Endpoint != "" {
		q.Set("endpoint", c.Endpoint)
	}
	if c.Region != "" {
		q.Set("region", c.Region)
	}
	if c.UsePathStyle {
		q.Set("use_path_style", "true")
	}
	if c.Anonymous {
		q.Set("anonymous", "true")
	}
	switch c.RequestChecksum {
	case aws.RequestChecksumCalculationWhenSupported:
		q.Set("request_checksum", "when_supported")
	case aws.RequestChecksumCalculationWhenRequired:
		q.Set("request_checksum", "when_required")
	}
	u.RawQuery = q.Encode()
	if c.Prefix == "" {
		u.Path = ""
	}
	return u.String()
}

// ParseURL parses an s3:// URL into a Config.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("s3: parse %q: %w", raw, err)
	}
	if u.Scheme != Scheme {
		return Config{}, fmt.Errorf("s3: %q: scheme is %q, want %q", raw, u.Scheme, Scheme)
	}
	if u.User != nil {
		return Config{}, fmt.Errorf("s3: %q: credentials do not belong in the URL; use the AWS environment", u.Redacted())
	}
	c := Config{Bucket: u.Host}
	if c.Bucket == "" {
		return Config{}, fmt.Errorf("s3: %q: no bucket", raw)
	}
	if c.Prefix, err = blobstore.NormalizePrefix(u.Path); err != nil {
		return Config{}, fmt.Errorf("s3: %q: %w", raw, err)
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "endpoint":
			if e, err := url.Parse(v); err != nil || e.Scheme == "" || e.Host == "" {
				return Config{}, fmt.Errorf("s3: %q: endpoint %q is not an absolute URL", raw, v)
			}
			c.Endpoint = v
		case "region":
			c.Region = v
		case "use_path_style", "anonymous":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, fmt.Errorf("s3: %q: %s=%q is not a boolean", raw, k, v)
			}
			if k == "anonymous" {
				c.Anonymous = b
			} else {
				c.UsePathStyle = b
			}
		case "request_checksum":
			switch v {
			case "when_supported":
				c.RequestChecksum = aws.RequestChecksumCalculationWhenSupported
			case "when_required":
				c.RequestChecksum = aws.RequestChecksumCalculationWhenRequired
			default:
				return Config{}, fmt.Errorf("s3: %q: request_checksum=%q, want when_supported or when_required", raw, v)
			}
		default:
			return Config{}, fmt.Errorf("s3: %q: unknown parameter %q", raw, k)
		}
	}
	return c, nil
}

// OpenURL parses raw and opens the store.
func OpenURL(ctx context.Context, raw string) (*blobstore.Store, error) {
	c, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	return Open(ctx, c)
}

// Open opens the store c describes. It does not contact the server: a
// missing bucket or bad credentials show up on the first operation.
func Open(ctx context.Context, c Config) (*blobstore.Store, error) {
	if c.Bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		return nil, fmt.Errorf("s3: prefix %q must end with /", c.Prefix)
	}
	var opts []func(*awsconfig.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	switch {
	case c.Anonymous:
		opts = append(opts, awsconfig.WithCredentialsProvider(aws.AnonymousCredentials{}))
	case c.Credentials != nil:
		opts = append(opts, awsconfig.WithCredentialsProvider(c.Credentials))
	}
	if c.RequestChecksum != 0 {
		opts = append(opts, awsconfig.WithRequestChecksumCalculation(c.RequestChecksum))
	}
	// The SDK's own messages go to the process's structured log at debug,
	// not to standard error in a format of their own.
	opts = append(opts, awsconfig.WithLogger(logging.LoggerFunc(func(class logging.Classification, format string, v ...any) {
		slog.Debug(fmt.Sprintf(format, v...), "component", "aws-sdk", "class", string(class))
	})))
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = DefaultRegion
	}
	client := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = c.UsePathStyle
	})
	bucket, err := s3blob.OpenBucket(ctx, client, c.Bucket, &s3blob.Options{RequestChecksumCalculation: c.RequestChecksum})
	if err != nil {
		return nil, fmt.Errorf("s3: open bucket %q: %w", c.Bucket, err)
	}
	if c.Prefix != "" {
		bucket = blob.PrefixedBucket(bucket, c.Prefix)
	}
	name := c.String()
	if i := strings.IndexByte(name, '?'); i >= 0 {
		name = name[:i]
	}
	return blobstore.New(bucket, name, blobstore.WithRangeReaderOptions(rangeReadOptions)), nil
}

// rangeReadOptions turns off response checksum validation for ranged
// reads only. With it on, the SDK asks for the object's checksum and
// compares it with the bytes received; some S3-compatible servers (gofakes3
// among them) send the whole object's checksum with a partial body, and
// every ranged read then fails. Whole-object Gets keep the validation.
var rangeReadOptions = &blob.ReaderOptions{
	BeforeRead: func(as func(any) bool) error {
		var optFns *[]func(*awss3.Options)
		if as(&optFns) {
			*optFns = append(*optFns, func(o *awss3.Options) {
				o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			})
		}
		return nil
	},
}
