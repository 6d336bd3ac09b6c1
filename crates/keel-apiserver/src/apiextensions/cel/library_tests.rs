//! The regex, IP, CIDR and semver libraries, with the cases of upstream's library tests
//! (`k8s.io/apiserver/pkg/cel/library/{cidr,ip,semver}_test.go`) and its doc examples.

use serde_json::{Value, json};

use super::{compile_rules, validate};

/// A resource whose `spec` has one rule, `rule`, and a string `s`.
fn schema(rule: &str) -> Value {
    json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {"s": {"type": "string", "maxLength": 64}},
        "x-kubernetes-validations": [{"rule": rule}]
    }}})
}

/// The errors of `rule` on a spec whose `s` is `s`, after checking that it compiles.
fn run_on(rule: &str, s: &str) -> Vec<String> {
    let schema = schema(rule);
    let compiled: Vec<String> = compile_rules(&schema, "x")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(compiled, Vec::<String>::new(), "{rule}");
    validate(&schema, &json!({"spec": {"s": s}}), None, "")
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Every rule holds.
fn hold(rules: &[&str]) {
    for rule in rules {
        assert_eq!(run_on(rule, ""), Vec::<String>::new(), "{rule}");
    }
}

/// `rule` fails at run time with `error`.
fn fails(rule: &str, error: &str) {
    assert_eq!(
        run_on(rule, ""),
        [format!(
            r#"spec: Invalid value: "object": {error} evaluating rule: {rule}"#
        )],
        "{rule}"
    );
}

#[test]
fn regex_find_and_find_all() {
    hold(&[
        "'abc 123'.find('[0-9]+') == '123'",
        "'abc 123'.find('xyz') == ''",
        "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
        "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
        "'123 abc 456'.findAll('[0-9]+', 0) == []",
        "'123 abc 456'.findAll('xyz') == []",
        // Go's FindAllString skips an empty match right after a match.
        "'123 abc 456'.findAll('[0-9]*') == ['123', '', '', '', '', '456']",
    ]);
    fails(
        "'a'.find('(') == ''",
        "Illegal regex: error parsing regexp: missing closing ): `(`",
    );
    // The string's length makes the estimate; a bounded one is within budget.
    assert_eq!(
        run_on("self.s.find('^v[0-9]+$') == self.s", "v12"),
        Vec::<String>::new()
    );
    assert_eq!(run_on("self.s.find('^v[0-9]+$') == self.s", "x").len(), 1);
}

/// `matches` runs on RE2's ASCII classes (`\d` is `[0-9]`, as Go's `regexp` reads it), on
/// patterns compiled once, and fails as cel-go's does on one that does not compile.
#[test]
fn matches_reads_patterns_as_re2() {
    hold(&[
        "'abc123'.matches('^[a-z]+[0-9]+$')",
        "matches('abc123', '[0-9]')",
        "!'\u{661}\u{662}'.matches('^\\\\d+$')",
        "'12'.matches('^\\\\d+$')",
        "!'\u{e9}'.matches('^\\\\w$')",
        "['a1', 'b2'].all(x, x.matches('^[a-z]\\\\d$'))",
    ]);
    fails(
        "'a'.matches('(')",
        "error parsing regexp: missing closing ): `(`",
    );
}

/// cel-go's `ext/comprehensions_test.go` (`TestTwoVarComprehensions`), but the cases that
/// use `optMap`, which the `cel` crate does not have.
#[test]
fn two_variable_comprehensions() {
    hold(&[
        "[1, 2, 3, 4].all(i, v, i < 5 && v > 0)",
        "[1, 2, 3, 4].all(i, v, i < v)",
        "[1, 2, 3, 4].all(i, v, i > v) == false",
        "cel.bind(listA, [1, 2, 3, 4], cel.bind(listB, [1, 2, 3, 4, 5], listA.all(i, v, listB[?i].hasValue() && listB[i] == v)))",
        "cel.bind(listA, [1, 2, 3, 4, 5, 6], cel.bind(listB, [1, 2, 3, 4, 5], listA.all(i, v, listB[?i].hasValue() && listB[i] == v))) == false",
        "['Hello', 'world'].transformList(i, v, \"[%d]%s\".format([i, v.lowerAscii()])) == [\"[0]hello\", \"[1]world\"]",
        "['hello', 'world'].transformList(i, v, v.startsWith('greeting'), \"[%d]%s\".format([i, v])) == []",
        "[1, 2, 3].transformList(indexVar, valueVar, (indexVar * valueVar) + valueVar) == [1, 4, 9]",
        "[1, 2, 3].transformList(indexVar, valueVar, indexVar % 2 == 0, (indexVar * valueVar) + valueVar) == [1, 9]",
        "['Hello', 'world'].transformMap(i, v, [v.lowerAscii()]) == {0: ['hello'], 1: ['world']}",
        "['world', 'Hello'].transformMap(i, v, [v.lowerAscii()]).transformList(k, v, v).flatten().sort() == ['hello', 'world']",
        "[1, 2, 3].transformMap(indexVar, valueVar, (indexVar * valueVar) + valueVar) == {0: 1, 1: 4, 2: 9}",
        "[1, 2, 3].transformMap(indexVar, valueVar, indexVar % 2 == 0, (indexVar * valueVar) + valueVar) == {0: 1, 2: 9}",
        "\"key1:value1 key2:value2 key3:value3\".split(\" \").transformMapEntry(i, v, cel.bind(entry, v.split(\":\"), entry.size() == 2 ? {entry[0]: entry[1]} : {})) == {'key1': 'value1', 'key2': 'value2', 'key3': 'value3'}",
        "\"key1:value1:extra key2:value2 key3\".split(\" \").transformMapEntry(i, v, cel.bind(entry, v.split(\":\"), {?entry[0]: entry[?1]})) == {'key1': 'value1', 'key2': 'value2'}",
        "{'hello': 'world', 'hello!': 'world'}.all(k, v, k.startsWith('hello') && v == 'world')",
        "{'hello': 'world', 'hello!': 'worlds'}.all(k, v, k.startsWith('hello') && v.endsWith('world')) == false",
        "{'hello': 'world', 'hello!': 'worlds'}.exists(k, v, k.startsWith('hello') && v.endsWith('world'))",
        "{'hello': 'world', 'hello!': 'worlds'}.existsOne(k, v, k.startsWith('hello') && v.endsWith('world'))",
        "{'hello': 'world', 'hello!': 'worlds'}.exists_one(k, v, k.startsWith('hello') && v.endsWith('world'))",
        "{'hello': 'world', 'hello!': 'wow, world'}.exists_one(k, v, k.startsWith('hello') && v.endsWith('world')) == false",
        "{'Hello': 'world'}.transformList(k, v, \"%s=%s\".format([k.lowerAscii(), v])) == [\"hello=world\"]",
        "dyn({'Hello': 'world'}).transformList(k, v, \"%s=%s\".format([k.lowerAscii(), v])) == [\"hello=world\"]",
        "{'hello': 'world'}.transformList(k, v, k.startsWith('greeting'), \"%s=%s\".format([k, v])) == []",
        "{'greeting': 'hello', 'farewell': 'goodbye'}.transformList(k, _, k).sort() == ['farewell', 'greeting']",
        "{'greeting': 'hello', 'farewell': 'goodbye'}.transformList(_, v, v).sort() == ['goodbye', 'hello']",
        "{'hello': 'world', 'goodbye': 'cruel world'}.transformMap(k, v, \"%s, %s!\".format([k, v])) == {'hello': 'hello, world!', 'goodbye': 'goodbye, cruel world!'}",
        "dyn({'hello': 'world', 'goodbye': 'cruel world'}).transformMap(k, v, \"%s, %s!\".format([k, v])) == {'hello': 'hello, world!', 'goodbye': 'goodbye, cruel world!'}",
        "{'hello': 'world', 'goodbye': 'cruel world'}.transformMap(k, v, v.startsWith('world'), \"%s, %s!\".format([k, v])) == {'hello': 'hello, world!'}",
        "{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, {k.reverse(): v.reverse()}) == {'olleh': 'dlrow', 'sgniteerg': 'tacocat'}",
        "{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, v.reverse() == v, {k.reverse(): v.reverse()}) == {'sgniteerg': 'tacocat'}",
        "{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, {}) == {}",
    ]);
    fails(
        "[1, 1].transformMapEntry(i, v, {v: i}) == {}",
        "insert failed: key 1 already exists",
    );
}

/// cel-go's `TestTwoVarComprehensionsStaticErrors`, but those of operand types the
/// checker does not judge (a filter that is not a bool, a step of two types).
#[test]
fn two_variable_comprehensions_refused() {
    for (rule, wanted) in [
        ("[].all(i, i, i < i)", "duplicate variable name: i"),
        (
            "[].all(__result__, i, __result__ < i)",
            "iteration variable overwrites accumulator variable",
        ),
        (
            "[].all(j, __result__, __result__ < j)",
            "iteration variable overwrites accumulator variable",
        ),
        ("[].all(i.j, k, i.j < k)", "argument must be a simple name"),
        ("[].all(j, i.k, j < i.k)", "argument must be a simple name"),
        ("1.all(j, k, j < k)", "cannot be range"),
        (
            "[].exists(i.j, k, i.j < k)",
            "argument must be a simple name",
        ),
        ("''.exists(j, k, j < k)", "cannot be range"),
        (
            "[].existsOne(j, i.k, j < i.k)",
            "argument must be a simple name",
        ),
        (
            "[].exists_one(i.j, k, i.j < k)",
            "argument must be a simple name",
        ),
        ("''.existsOne(j, k, j < k)", "cannot be range"),
        (
            "[].transformList(i.j, k, i.j + k) == []",
            "argument must be a simple name",
        ),
        (
            "{}.transformMap(j, i.k, j + i.k) == {}",
            "argument must be a simple name",
        ),
        (
            "{}.transformMapEntry(i.j, k, {k: i.j}) == {}",
            "argument must be a simple name",
        ),
    ] {
        let errors: Vec<String> = compile_rules(&schema(rule), "x")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errors.iter().any(|e| e.contains(wanted)),
            "{rule}: {errors:#?}"
        );
    }
}

#[test]
fn ip_addresses() {
    hold(&[
        "isIP('127.0.0.1') && isIP('::1') && !isIP('127.0.0.256') && !isIP(':::1')",
        "!isIP('::ffff:1.2.3.4') && !isIP('fe80::1%eth0') && !isIP('127.0.0.01')",
        "ip('127.0.0.1').family() == 4 && ip('::1').family() == 6",
        "ip('0.0.0.0').isUnspecified() && !ip('127.0.0.1').isUnspecified() && ip('::').isUnspecified()",
        "ip('127.0.0.1').isLoopback() && !ip('192.168.0.1').isLoopback() && ip('::1').isLoopback()",
        "ip('224.0.0.1').isLinkLocalMulticast() && !ip('224.0.1.1').isLinkLocalMulticast()",
        "ip('ff02::1').isLinkLocalMulticast() && !ip('fd00::1').isLinkLocalMulticast()",
        "ip('169.254.169.254').isLinkLocalUnicast() && !ip('192.168.0.1').isLinkLocalUnicast()",
        "ip('fe80::1').isLinkLocalUnicast() && !ip('fd80::1').isLinkLocalUnicast()",
        "ip('192.168.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()",
        "ip('2001:db8::abcd').isGlobalUnicast() && !ip('ff00::1').isGlobalUnicast()",
        "ip.isCanonical('127.0.0.1') && ip.isCanonical('2001:db8::abcd')",
        "!ip.isCanonical('2001:DB8::ABCD') && !ip.isCanonical('2001:db8::0:0:0:abcd')",
        "ip('2001:db8::0:0:0:abcd') == ip('2001:db8::abcd')",
        "string(ip('2001:DB8::1')) == '2001:db8::1'",
        // A variable named `ip` is the variable, not the namespace.
        "[ip('1.2.3.4')].all(ip, ip.family() == 4)",
    ]);
    fails(
        "ip('127.0.0.256').family() == 4",
        r#"IP Address "127.0.0.256" parse error during conversion from string: ParseAddr("127.0.0.256"): IPv4 field has value >255"#,
    );
    fails(
        "ip('::ffff:1.2.3.4').family() == 6",
        r#"IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed"#,
    );
    fails(
        "ip('fe80::1%eth0').family() == 6",
        r#"IP address "fe80::1%eth0" with zone value is not allowed"#,
    );
}

#[test]
fn cidrs() {
    hold(&[
        "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
        "!cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
        "cidr('192.168.0.0/24').containsIP('192.168.0.1')",
        "!cidr('192.168.0.0/24').containsIP('192.168.1.1')",
        "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))",
        "!cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))",
        "cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25')",
        "!cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')",
        "cidr('192.168.0.0/24').ip() == ip('192.168.0.0')",
        "cidr('192.168.0.1/24').ip() == ip('192.168.0.1')",
        "cidr('192.168.0.0/24').masked() == cidr('192.168.0.0/24')",
        "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
        "cidr('192.168.0.1/24') != cidr('192.168.0.1/24').masked()",
        "cidr('192.168.0.0/24').prefixLength() == 24",
        "cidr('2001:db8::/32').containsIP(ip('2001:db8::1'))",
        "!cidr('2001:db8::/32').containsIP(ip('2001:dc8::1'))",
        "cidr('2001:db8::/32').containsIP('2001:db8::1')",
        "cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/33'))",
        "!cidr('2001:db8::/32').containsCIDR('2001:db8::/31')",
        "cidr('2001:db8::/32').ip() == ip('2001:db8::')",
        "cidr('2001:db8:1::/32').masked() == cidr('2001:db8::/32')",
        "cidr('2001:db8::/32').prefixLength() == 32",
        "string(cidr('192.168.0.0/24')) == '192.168.0.0/24'",
        "isCIDR('192.168.0.0/16') && isCIDR('::1/128')",
        "!isCIDR('192.168.0.0/33') && !isCIDR('::1/129') && !isCIDR('::ffff:1.2.3.4/120')",
        "!cidr('10.0.0.0/8').containsIP(ip('::1'))",
    ]);
    fails(
        "cidr('192.168.0.0/').prefixLength() == 0",
        r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("192.168.0.0/"): bad bits after slash: """#,
    );
    fails(
        "cidr('2001:db8::/').prefixLength() == 0",
        r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("2001:db8::/"): bad bits after slash: """#,
    );
    // A string that is not an IP matches no overload of containsIP, upstream.
    assert_eq!(
        run_on("cidr('10.0.0.0/8').containsIP(self.s)", "x"),
        [
            "spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: cidr('10.0.0.0/8').containsIP(self.s)"
        ]
    );
}

#[test]
fn semantic_versions() {
    hold(&[
        "semver('1.2.3') == semver('1.2.3') && semver('1.2.3') != semver('1.0.0')",
        "isSemver('1.2.3-beta.1+build.1') && !isSemver('') && !isSemver('v1.0.0')",
        "!isSemver(' 1.0.0') && !isSemver('1. 0.0') && !isSemver('1.0.0 ')",
        "!isSemver('01.01.01') && !isSemver('1') && !isSemver('1.1')",
        "!isSemver('', true) && !isSemver(' 1.0.0', true) && !isSemver('1.0.0 ', true)",
        "isSemver('v1.0.0', true) && isSemver('01.01.01', true) && isSemver('1', true)",
        "isSemver('1.1', true) && !isSemver('1.1-pre', true)",
        "semver('v01.01', true) == semver('1.1.0')",
        "semver('1.0.0').isLessThan(semver('1.2.3'))",
        "!semver('1.0.0').isLessThan(semver('1.0.0'))",
        "semver('1.2.3').isGreaterThan(semver('1.0.0'))",
        "semver('1.2.3').compareTo(semver('1.2.3')) == 0",
        "semver('1.0.0').compareTo(semver('1.2.3')) == -1",
        "semver('1.2.3').compareTo(semver('0.1.2')) == 1",
        "semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3",
        "semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))",
        "semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-beta'))",
        "semver('1.0.0-2').isLessThan(semver('1.0.0-11')) && semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))",
        "semver('1.0.0+a') == semver('1.0.0+b')",
        // Quantities keep their own comparisons.
        "quantity('1Ki').compareTo(quantity('1024')) == 0",
    ]);
    fails(
        "semver('v1.0').major() == 1",
        "No Major.Minor.Patch elements found",
    );
    fails(
        "semver('1.02.3').major() == 1",
        r#"Minor number must not contain leading zeroes "02""#,
    );
    fails("semver('1.2.3-').major() == 1", "Prerelease is empty");
}

#[test]
fn named_formats() {
    hold(&[
        "!format.dns1123Label().validate('my-label-name').hasValue()",
        "format.dns1123Label().validate('NOT A LABEL').hasValue()",
        "!format.dns1123Subdomain().validate('apiextensions.k8s.io').hasValue()",
        "!format.dns1035Label().validate('my-label-name').hasValue()",
        "format.dns1035Label().validate('1abc').hasValue()",
        "!format.qualifiedName().validate('apiextensions.k8s.io/v1beta1').hasValue()",
        "!format.dns1123LabelPrefix().validate('my-label-prefix-').hasValue()",
        "format.dns1123Label().validate('my-label-prefix-').hasValue()",
        "!format.dns1123SubdomainPrefix().validate('mysubdomain.prefix.-').hasValue()",
        "!format.dns1035LabelPrefix().validate('my-label-prefix-').hasValue()",
        "!format.labelValue().validate('my_value').hasValue()",
        "!format.uri().validate('http://example.com').hasValue()",
        "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
        "!format.byte().validate('aGVsbG8=').hasValue()",
        "!format.date().validate('2021-01-01').hasValue()",
        "!format.datetime().validate('2021-01-01T00:00:00Z').hasValue()",
        "format.uuid().validate('x').value() == ['does not match the UUID format']",
        "format.byte().validate('!').value() == ['invalid base64']",
        "format.date().validate('2021-13-01').value() == ['invalid date']",
        "format.datetime().validate('x').value() == ['invalid datetime']",
        "format.uri().validate('x').value() == ['parse \"x\": invalid URI for request']",
        "format.named('dns1123Label').hasValue() && !format.named('unknown').hasValue()",
        "format.named('dns1123Label').value().validate('a').hasValue() == false",
        "['ab'].all(format, format.size() == 2)",
        // The string format extension is still there.
        "'%s!'.format(['hi']) == 'hi!'",
    ]);
    assert_eq!(
        run_on(
            "!format.dns1123Label().validate(self.s).hasValue()",
            "Not_A_Label"
        ),
        [
            "spec: Invalid value: \"object\": failed rule: !format.dns1123Label().validate(self.s).hasValue()"
        ]
    );
    let message = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
        characters or '-', and must start and end with an alphanumeric character (e.g. \
        'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    assert_eq!(
        run_on(
            &format!("format.dns1123Label().validate('A').value() == [\"{message}\"]"),
            ""
        ),
        Vec::<String>::new()
    );
}

#[test]
fn a_parser_of_something_not_a_string_does_not_compile() {
    let errors = |rule: &str| -> Vec<String> {
        compile_rules(&schema(rule), "x")
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    for (rule, words) in [
        (
            "cidr(192168).prefixLength() == 0",
            "'cidr' applied to '(int)'",
        ),
        ("isSemver([1, 2, 3])", "'isSemver' applied to '(list(int))'"),
        ("isIP(true)", "'isIP' applied to '(bool)'"),
    ] {
        let found = errors(rule);
        assert!(
            found.len() == 1
                && found[0].contains(&format!("found no matching overload for {words}")),
            "{rule}: {found:?}"
        );
    }
    assert_eq!(
        errors("isIP(self.s) && cidr(dyn('10.0.0.0/8')).prefixLength() == 8"),
        Vec::<String>::new()
    );
}

#[test]
fn object_data_never_poses_as_a_library_value_and_odd_names_never_panic() {
    hold(&[
        "format.dns1123LabelPrefix().validate('aé-').hasValue()",
        "format.dns1035LabelPrefix().validate('é-').hasValue()",
    ]);
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {"m": {"type": "object", "maxProperties": 4,
            "additionalProperties": {"type": "string", "maxLength": 32}}},
        "x-kubernetes-validations": [
            {"rule": "self.m.masked().prefixLength() >= 0"},
            {"rule": "self.m.major() >= 0"},
        ]
    }}});
    let posing = json!({"spec": {"m": {"@cidr": "1.2.3.4/99", "@semver": "1.2.3"}}});
    let errors: Vec<String> = validate(&schema, &posing, None, "")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors.iter().all(|e| e.contains("no such overload")),
        "{errors:?}"
    );
}
