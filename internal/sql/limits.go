package sql

import (
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/pgwire"
)

// MaxStatementBytes bounds the text of one query (all its statements).
//
// Why: the scanner and parser hold the whole text and a token or node per
// few bytes of it, several times its size; a flat statement of many
// megabytes (a VALUES list, a UNION ALL chain) would cost that much memory
// before any limit that counts rows applies. DuckLake's largest statements
// are its catalog reads, tens of kilobytes; bulk data travels as COPY, whose
// rows are not statement text.
const MaxStatementBytes = 16 << 20

// CheckSize refuses a query text longer than MaxStatementBytes with
// PostgreSQL's 54000 program_limit_exceeded, before anything parses it.
func CheckSize(sql string) error {
	if len(sql) <= MaxStatementBytes {
		return nil
	}
	return &pgwire.Error{Code: pgcode.ProgramLimitExceeded,
		Message: fmt.Sprintf("statement is too long (%d bytes)", len(sql)),
		Hint:    fmt.Sprintf("moraine refuses query texts longer than %d bytes; send bulk data with COPY.", MaxStatementBytes)}
}

// MaxExprDepth bounds how deeply one statement's expressions may nest.
//
// Why: pg_query's parser and its protobuf encoding recurse once per level
// of the parse tree, on the C stack of the calling thread and in Go's
// protobuf decoder (which gives up at 10 000 nested messages, about 5 000
// expression levels). `SELECT 1+1+…+1` with 30 000 terms overflows the C
// stack and kills the process. PostgreSQL refuses such a statement with
// 54001 "stack depth limit exceeded" once its own recursion passes
// max_stack_depth; moraine refuses it before the parser sees it, at a depth
// no client sends (DuckLake's deepest statements nest a few levels).
const MaxExprDepth = 1000

// CheckDepth estimates, from the statement's tokens alone, an upper bound
// of the depth of its parse tree, and refuses a text past MaxExprDepth with
// PostgreSQL's 54001. The estimate counts, at each point of the text, the
// open parentheses, brackets and CASE expressions plus the operators seen
// since the last comma at each open level: a chain of k binary operators
// nests k deep, a comma-separated list does not nest, and AND/OR chains are
// flattened by the grammar into one node. The scanner does not recurse, so
// any text can be scanned; one that does not scan is left to the parser,
// whose syntax error then stops it at the first bad token.
func CheckDepth(sql string) error {
	res, err := pg.Scan(sql)
	if err != nil {
		return nil
	}
	// ops[i] counts the operators since the last comma at open level i;
	// caseLevel[i] marks a level opened by CASE (closed by END).
	ops := []int{0}
	caseLevel := []bool{false}
	sum := 0 // sum of ops
	for _, t := range res.Tokens {
		switch t.Token {
		case pg.Token_ASCII_40, pg.Token_ASCII_91, pg.Token_CASE: // ( [ CASE
			ops = append(ops, 0)
			caseLevel = append(caseLevel, t.Token == pg.Token_CASE)
		case pg.Token_ASCII_41, pg.Token_ASCII_93, pg.Token_END_P: // ) ] END
			top := len(ops) - 1
			if top == 0 || (t.Token == pg.Token_END_P) != caseLevel[top] {
				continue // unbalanced, or END of a transaction: the parser judges
			}
			sum -= ops[top]
			ops, caseLevel = ops[:top], caseLevel[:top]
		case pg.Token_ASCII_44: // ,
			sum -= ops[len(ops)-1]
			ops[len(ops)-1] = 0
		case pg.Token_ASCII_59: // ; ends a statement
			ops, caseLevel, sum = ops[:1], caseLevel[:1], 0
			ops[0] = 0
		case pg.Token_ASCII_37, pg.Token_ASCII_42, pg.Token_ASCII_43, pg.Token_ASCII_45,
			pg.Token_ASCII_47, pg.Token_ASCII_60, pg.Token_ASCII_61, pg.Token_ASCII_62,
			pg.Token_ASCII_94, pg.Token_Op, pg.Token_TYPECAST, pg.Token_LESS_EQUALS,
			pg.Token_GREATER_EQUALS, pg.Token_NOT_EQUALS, pg.Token_NOT, pg.Token_IS,
			pg.Token_LIKE, pg.Token_ILIKE, pg.Token_SIMILAR, pg.Token_BETWEEN,
			pg.Token_COLLATE, pg.Token_AT, pg.Token_OPERATOR, pg.Token_IN_P:
			ops[len(ops)-1]++
			sum++
		default:
			continue
		}
		if len(ops)-1+sum > MaxExprDepth {
			return &pgwire.Error{Code: pgcode.StatementTooComplex, Message: "stack depth limit exceeded",
				Hint: fmt.Sprintf("moraine refuses statements whose expressions nest more than %d levels deep.", MaxExprDepth)}
		}
	}
	return nil
}
