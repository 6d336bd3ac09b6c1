//! Bearer tokens from a static token file, as kube-apiserver's `--token-auth-file` reads it
//! (`k8s.io/apiserver/pkg/authentication/token/tokenfile`), checked as its bearer token
//! authenticator checks an `Authorization` header; and the admin token keel makes on first
//! start.
//!
//! The file is CSV as Go's `encoding/csv` reads it with `FieldsPerRecord = -1`: one user a
//! record, `token,user,uid` and optionally `"group1,group2"`; blank lines are skipped, `#` is not
//! a comment, leading spaces are kept, a field with a `"` must be quoted whole (`""` inside for a
//! quote), a record with fewer than 3 fields is an error, a record with an empty token is skipped
//! with a warning, and of two records with the same token the later wins, with a warning.

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::tls::{random_bytes, write_atomic};

/// The group whose members may do anything (kube-apiserver's built-in RBAC binding).
pub const MASTERS_GROUP: &str = "system:masters";

/// Why a token file could not be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file could not be read.
    #[error("cannot read the token file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The file could not be written.
    #[error("cannot write the token file {}: {source}; check that its directory is writable", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The file is not valid CSV.
    #[error("token file {} line {line}: {problem}", path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// The line (from 1) where the problem is.
        line: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// A record has fewer than 3 columns.
    #[error(
        "token file {} line {line}: a record must have at least 3 columns (token, user name, \
         user uid), found {found}; write token,user,uid or token,user,uid,\"group1,group2\"",
        path.display()
    )]
    TooFewColumns {
        /// The file.
        path: PathBuf,
        /// The line (from 1) where the record starts.
        line: usize,
        /// How many columns it has.
        found: usize,
    },
    /// No user of the file is in `system:masters`.
    #[error(
        "the token file {} has no token for a user in the group system:masters; add a line \
         token,admin,admin,\"system:masters\" or remove the file to have one made",
        path.display()
    )]
    NoAdmin {
        /// The file.
        path: PathBuf,
    },
    /// The system random number generator failed.
    #[error("cannot make a token: {0}")]
    Random(String),
}

/// The group every authenticated user is in (apiserver's `user.AllAuthenticated`).
pub const ALL_AUTHENTICATED: &str = "system:authenticated";

/// Who sent a request (apiserver's `user.Info`): who a token says its bearer is, or who a
/// server without authentication serves everyone as.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    /// The user name (second column).
    pub name: String,
    /// The user's uid (third column).
    pub uid: String,
    /// The user's groups (fourth column split on commas; empty without one).
    pub groups: Vec<String>,
    /// Further attributes (`user.Info.GetExtra`; a token file gives none).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// The user with `system:authenticated` added, as apiserver's `AuthenticatedGroupAdder`
    /// adds it to every authenticated user not already in it or in `system:unauthenticated`.
    pub fn authenticated(mut self) -> User {
        if !self
            .groups
            .iter()
            .any(|g| g == ALL_AUTHENTICATED || g == "system:unauthenticated")
        {
            self.groups.push(ALL_AUTHENTICATED.to_string());
        }
        self
    }

    /// Who a server without authentication (`--plain-http`) serves everyone as, as
    /// kube-apiserver's insecure port did: `system:unsecured`, in `system:masters`
    /// (`InsecureSuperuser`).
    pub fn unsecured() -> User {
        User {
            name: "system:unsecured".into(),
            groups: vec![MASTERS_GROUP.into(), ALL_AUTHENTICATED.into()],
            ..User::default()
        }
    }
}

/// The tokens of a token file, in file order.
pub struct Tokens {
    entries: Vec<(String, User)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(_, user)| &user.name))
            .finish()
    }
}

impl Tokens {
    /// Reads a token file (`--token-auth-file`).
    pub fn load(path: &Path) -> Result<Tokens, AuthError> {
        let text = fs::read_to_string(path).map_err(|source| AuthError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        parse(&text, path)
    }

    /// The user whose token an `Authorization` header carries, as kube-apiserver's bearer token
    /// authenticator reads it: `Bearer <token>`, the scheme in any case, one space, the token
    /// up to the next space. No header, another scheme, an empty token or an unknown token is
    /// `None`. Every token is compared, each in constant time.
    pub fn authenticate(&self, authorization_header: Option<&str>) -> Option<&User> {
        let token = bearer_token(authorization_header?)?;
        let mut found = None;
        for (candidate, user) in &self.entries {
            if constant_time_eq(candidate.as_bytes(), token.as_bytes()) && found.is_none() {
                found = Some(user);
            }
        }
        found
    }

    /// The authenticated user an `Authorization` header names ([`Tokens::authenticate`],
    /// with `system:authenticated` added as [`User::authenticated`] adds it).
    pub fn user_of(&self, authorization_header: Option<&str>) -> Option<User> {
        self.authenticate(authorization_header)
            .map(|user| user.clone().authenticated())
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no token.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn first_in_group(&self, group: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(_, user)| user.groups.iter().any(|g| g == group))
            .map(|(token, _)| token.as_str())
    }
}

/// The admin token in the token file at `path`: when there is no file, a new random token
/// (32 bytes, hex) written there as `<token>,admin,admin,"system:masters"` (mode 0600);
/// otherwise the token of the file's first user in `system:masters`.
pub fn ensure_admin_token(path: &Path) -> Result<String, AuthError> {
    let exists = path.try_exists().map_err(|source| AuthError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if exists {
        let tokens = Tokens::load(path)?;
        return tokens
            .first_in_group(MASTERS_GROUP)
            .map(str::to_string)
            .ok_or_else(|| AuthError::NoAdmin {
                path: path.to_path_buf(),
            });
    }
    let bytes = random_bytes::<32>().map_err(|e| AuthError::Random(e.to_string()))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let write_error = |source| AuthError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(write_error)?;
    }
    let line = format!("{token},admin,admin,\"{MASTERS_GROUP}\"\n");
    write_atomic(path, line.as_bytes(), 0o600).map_err(write_error)?;
    Ok(token)
}

fn parse(text: &str, path: &Path) -> Result<Tokens, AuthError> {
    let records = read_csv(text).map_err(|(line, problem)| AuthError::Csv {
        path: path.to_path_buf(),
        line,
        problem,
    })?;
    let mut entries: Vec<(String, User)> = Vec::new();
    for (line, mut record) in records {
        if record.len() < 3 {
            return Err(AuthError::TooFewColumns {
                path: path.to_path_buf(),
                line,
                found: record.len(),
            });
        }
        if record[0].is_empty() {
            tracing::warn!(file = %path.display(), line, "empty token in the token file; the record is ignored");
            continue;
        }
        let groups = match record.get(3) {
            Some(groups) => groups.split(',').map(str::to_string).collect(),
            None => Vec::new(),
        };
        record.truncate(3);
        let uid = record.pop().unwrap_or_default();
        let name = record.pop().unwrap_or_default();
        let token = record.pop().unwrap_or_default();
        let user = User {
            name,
            uid,
            groups,
            extra: BTreeMap::new(),
        };
        match entries.iter_mut().find(|(t, _)| *t == token) {
            Some(entry) => {
                tracing::warn!(file = %path.display(), line, "duplicate token in the token file; the later record wins");
                entry.1 = user;
            }
            None => entries.push((token, user)),
        }
    }
    Ok(Tokens { entries })
}

/// The token of an `Authorization` header, as `bearertoken.Authenticator` takes it.
fn bearer_token(header: &str) -> Option<&str> {
    let header = header.trim();
    let mut parts = header.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return None;
    }
    Some(token)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A CSV record: the line it starts on and its fields.
type Record = (usize, Vec<String>);

/// How a field ended.
enum End {
    Field,
    Record,
}

/// Records of `text` with the line each starts on, as Go's `encoding/csv` reads them with a
/// comma separator, no comment character, no lazy quotes and no trimming; or the line of the
/// first syntax error and what it is.
fn read_csv(text: &str) -> Result<Vec<Record>, (usize, &'static str)> {
    let text = text.replace("\r\n", "\n");
    let mut chars = text.chars().peekable();
    let mut line = 1;
    let mut records = Vec::new();
    loop {
        while chars.next_if_eq(&'\n').is_some() {
            line += 1;
        }
        if chars.peek().is_none() {
            return Ok(records);
        }
        let start = line;
        let mut record = Vec::new();
        loop {
            let mut field = String::new();
            let end = if chars.next_if_eq(&'"').is_some() {
                loop {
                    match chars.next() {
                        None => return Err((line, "a quoted field has no closing quote")),
                        Some('"') => match chars.next() {
                            Some('"') => field.push('"'),
                            Some(',') => break End::Field,
                            Some('\n') => {
                                line += 1;
                                break End::Record;
                            }
                            None => break End::Record,
                            Some(_) => {
                                return Err((
                                    line,
                                    "a quote inside a quoted field must be doubled (\"\")",
                                ));
                            }
                        },
                        Some('\n') => {
                            line += 1;
                            field.push('\n');
                        }
                        Some(c) => field.push(c),
                    }
                }
            } else {
                loop {
                    match chars.next() {
                        None => break End::Record,
                        Some('\n') => {
                            line += 1;
                            break End::Record;
                        }
                        Some(',') => break End::Field,
                        Some('"') => {
                            return Err((
                                line,
                                "a field with a quote must be quoted whole, starting right after the comma",
                            ));
                        }
                        Some(c) => field.push(c),
                    }
                }
            };
            record.push(field);
            if let End::Record = end {
                break;
            }
        }
        records.push((start, record));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn parse_str(text: &str) -> Result<Tokens, AuthError> {
        parse(text, Path::new("tokens.csv"))
    }

    fn user(name: &str, uid: &str, groups: &[&str]) -> User {
        User {
            name: name.to_string(),
            uid: uid.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            extra: BTreeMap::new(),
        }
    }

    #[test]
    fn parses_quoted_groups_and_skips_blank_lines() {
        let tokens = parse_str(
            "abc,alice,1,\"system:masters,devs\"\r\n\n\
             def,bob,2\n\
             ghi,carol,3,solo,extra\n\
             \"j,k\",\"dan \"\"d\"\"\",4,\"\"\n",
        )
        .expect("parse");
        assert_eq!(tokens.len(), 4);
        let auth = |t: &str| tokens.authenticate(Some(&format!("Bearer {t}"))).cloned();
        assert_eq!(
            auth("abc"),
            Some(user("alice", "1", &["system:masters", "devs"]))
        );
        assert_eq!(auth("def"), Some(user("bob", "2", &[])));
        assert_eq!(auth("ghi"), Some(user("carol", "3", &["solo"])));
        // As strings.Split does, an empty fourth column is one empty group.
        assert_eq!(auth("j,k"), Some(user("dan \"d\"", "4", &[""])));
        // Leading spaces are kept and # is no comment, as encoding/csv reads them.
        let tokens = parse_str("#x,y,z\n a,b,c\n").expect("parse");
        assert_eq!(
            tokens
                .authenticate(Some("Bearer #x"))
                .map(|u| u.name.as_str()),
            Some("y")
        );
        assert_eq!(tokens.authenticate(Some("Bearer  a")), None);
    }

    #[test]
    fn a_short_record_is_an_error_naming_its_line() {
        let err = parse_str("abc,alice,1\n\nshort,only\n").expect_err("short");
        assert!(
            matches!(
                err,
                AuthError::TooFewColumns {
                    line: 3,
                    found: 2,
                    ..
                }
            ),
            "{err}"
        );
        let message = err.to_string();
        assert!(message.contains("tokens.csv line 3"), "{message}");
        assert!(message.contains("at least 3 columns"), "{message}");

        let err = parse_str("a,b,c\nx,\"y\nz,w\n").expect_err("unclosed");
        assert!(matches!(err, AuthError::Csv { .. }), "{err}");
        let err = parse_str("a,b\"c,d\n").expect_err("bare quote");
        assert!(matches!(err, AuthError::Csv { line: 1, .. }), "{err}");
        let err = parse_str("a,\"b\"c,d\n").expect_err("extraneous quote");
        assert!(matches!(err, AuthError::Csv { line: 1, .. }), "{err}");
    }

    #[test]
    fn an_empty_token_is_skipped_and_never_matches() {
        let tokens = parse_str(",root,0,system:masters\nabc,alice,1\n").expect("parse");
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens.authenticate(Some("Bearer ")), None);
        assert_eq!(tokens.authenticate(Some("Bearer")), None);
        assert_eq!(tokens.authenticate(Some("Bearer  abc")), None);
        assert!(tokens.authenticate(Some("Bearer abc")).is_some());
    }

    #[test]
    fn a_duplicate_token_takes_the_later_record() {
        let tokens = parse_str("abc,alice,1\ndef,bob,2\nabc,carol,3\n").expect("parse");
        assert_eq!(tokens.len(), 2);
        let found = tokens.authenticate(Some("Bearer abc")).expect("user");
        assert_eq!(found.name, "carol");
    }

    #[test]
    fn authenticate_reads_the_header_as_kube_apiserver_does() {
        let tokens = parse_str("s3cret,alice,1\n").expect("parse");
        assert_eq!(tokens.authenticate(None), None);
        assert_eq!(tokens.authenticate(Some("")), None);
        assert_eq!(tokens.authenticate(Some("Basic s3cret")), None);
        assert_eq!(tokens.authenticate(Some("Bearer wrong")), None);
        assert_eq!(tokens.authenticate(Some("Bearer s3cre")), None);
        assert_eq!(tokens.authenticate(Some("Bearer s3crets")), None);
        for header in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "  Bearer s3cret  ",
            "Bearer s3cret trailing",
        ] {
            let found = tokens.authenticate(Some(header));
            assert_eq!(found.map(|u| u.name.as_str()), Some("alice"), "{header:?}");
        }
    }

    #[test]
    fn ensure_admin_token_is_idempotent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("auth").join("tokens.csv");
        let token = ensure_admin_token(&path).expect("create");
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
        let mode = fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            fs::read_to_string(&path).expect("read"),
            format!("{token},admin,admin,\"system:masters\"\n")
        );
        assert_eq!(ensure_admin_token(&path).expect("reload"), token);
        let tokens = Tokens::load(&path).expect("load");
        let admin = tokens
            .authenticate(Some(&format!("Bearer {token}")))
            .expect("admin");
        assert_eq!(admin, &user("admin", "admin", &["system:masters"]));

        let other = dir.path().join("other.csv");
        assert_ne!(ensure_admin_token(&other).expect("other"), token);

        let no_admin = dir.path().join("no-admin.csv");
        fs::write(&no_admin, "abc,alice,1,devs\n").expect("write");
        let err = ensure_admin_token(&no_admin).expect_err("no admin");
        assert!(matches!(err, AuthError::NoAdmin { .. }), "{err}");
        fs::write(
            &no_admin,
            "abc,alice,1,devs\ndef,root,0,\"a,system:masters\"\n",
        )
        .expect("write");
        assert_eq!(ensure_admin_token(&no_admin).expect("admin"), "def");
    }
}
