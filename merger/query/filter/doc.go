// Package filter is the filter language of writeout's queries: the filters (Eq, In, IsNull,
// And, Or, Not) that select rows of segments and builders, and Parse, which reads them written
// as text, for the command line. Package merger/query evaluates them; this package only
// reads, writes and inspects them.
//
// # Expressions
//
//	page = 'home'                    Eq: the row holds the value (any of its values, multi-value)
//	page != 'home'                   Not(Eq); also "<>"; null rows match it
//	page in ('home', 'about')        In
//	page not in ('home')             Not(In)
//	page is null                     IsNull: null row, or empty multi-value list
//	page is not null                 Not(IsNull)
//	a = 'x' and (b = 'y' or not c is null)
//	true, false                      every row, no row
//
// Precedence, loosest first: or, and, not. Keywords are case-insensitive. A dimension name is
// a word of letters, digits, '_', '.' and '-' (not starting with a digit, '.' or '-'), or any
// text in double quotes. Strings are in single quotes. Inside either quotes, a backslash
// escapes: \\ \' \" \n \r \t, \xHH (a byte), \uHHHH and \UHHHHHHHH (a code point). Filter.String
// writes a filter back in this language. A syntax error is a *ParseError giving the 1-based
// column.
package filter
