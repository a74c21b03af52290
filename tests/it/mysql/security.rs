//! The DSN's password never reaches output, errors or the store; access denied is R14.

use super::{db, Env};

/// A password unlikely to appear anywhere by chance.
fn canary() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("Canary{}x{nanos}Pw", std::process::id())
}

#[test]
fn the_password_never_appears_in_output_errors_or_the_store() {
    let Some(db) = db() else { return };
    let t = db.table("canary");
    db.numbered(&t, 50);
    let pw = canary();
    let user = db.user("canary", &pw);
    db.exec(&format!("GRANT SELECT ON test.{t} TO '{user}'@'%'"));
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "customers", "page_size": 20}"#);
    let dsn = format!("mysql://{user}:{pw}@127.0.0.1:3306/test");
    let mut transcript = String::new();
    let mut run = |args: &[&str], env_dsn: Option<&str>| {
        let mut cmd = std::process::Command::new(crate::util::bin());
        cmd.args(["--store", &env.store]).args(args);
        if let Some(d) = env_dsn {
            cmd.env("SL_MY_CANARY_DSN", d);
        }
        let out = cmd.output().unwrap();
        transcript.push_str(&String::from_utf8_lossy(&out.stdout));
        transcript.push_str(&String::from_utf8_lossy(&out.stderr));
        out.status.code().unwrap_or(-1)
    };

    let in_file = env.file(
        "in_file.json",
        &format!(r#"{{"dsn": "{dsn}", "table": "{t}", "key": "id", "content": ["email"]}}"#),
    );
    let src = format!("mysql:{in_file}");
    assert_eq!(
        run(
            &[
                "--json",
                "scan",
                "--contract",
                &c,
                "--source",
                &src,
                "--progress"
            ],
            None
        ),
        0
    );
    assert_eq!(run(&["scan", "--contract", &c, "--source", &src], None), 0);
    assert_eq!(run(&["runs"], None), 0);
    assert_eq!(run(&["--json", "runs"], None), 0);
    assert_eq!(run(&["receipt", "1"], None), 0);

    let from_env = env.file(
        "from_env.json",
        &format!(r#"{{"dsn_env": "SL_MY_CANARY_DSN", "table": "{t}", "key": "id"}}"#),
    );
    let src_env = format!("mysql:{from_env}");
    assert_eq!(
        run(
            &["scan", "--contract", &c, "--source", &src_env],
            Some(&dsn)
        ),
        0
    );
    // Failures: a wrong password (the canary plus one character), a missing table, a bad DSN
    // parameter, a bad predicate.
    let wrong = format!("mysql://{user}:{pw}X@127.0.0.1:3306/test");
    assert_eq!(
        run(
            &["--json", "scan", "--contract", &c, "--source", &src_env],
            Some(&wrong)
        ),
        3
    );
    for (name, body) in [
        (
            "gone.json",
            format!(r#"{{"dsn": "{dsn}", "table": "{t}_gone", "key": "id"}}"#),
        ),
        (
            "param.json",
            format!(r#"{{"dsn": "{dsn}?bogus={pw}", "table": "{t}", "key": "id"}}"#),
        ),
        (
            "pred.json",
            format!(r#"{{"dsn": "{dsn}", "table": "{t}", "key": "id", "where": "(("}}"#),
        ),
        (
            "scheme.json",
            format!(r#"{{"dsn": "mariadb://{user}:{pw}@h/db", "table": "{t}", "key": "id"}}"#),
        ),
    ] {
        let f = env.file(name, &body);
        let code = run(
            &[
                "--json",
                "scan",
                "--contract",
                &c,
                "--source",
                &format!("mysql:{f}"),
            ],
            None,
        );
        assert!(code == 2 || code == 3, "{name}: exit {code}");
    }

    assert!(transcript.contains("verified") || transcript.contains("VERIFIED"));
    assert!(
        transcript.contains("access_denied"),
        "the wrong password is access denied"
    );
    assert!(
        !transcript.contains(&pw),
        "the password leaked into output:\n{transcript}"
    );
    let store = std::fs::read(&env.store).unwrap();
    assert!(
        !store.windows(pw.len()).any(|w| w == pw.as_bytes()),
        "the password is in the store file"
    );
}

#[test]
fn a_user_without_select_gets_access_denied_not_an_empty_collection() {
    let Some(db) = db() else { return };
    let t = db.table("denied");
    db.numbered(&t, 10);
    let other = db.table("denied_other");
    db.numbered(&other, 1);
    let pw = canary();
    let user = db.user("denied", &pw);
    // May connect to `test` (it can read another table), may not read this one.
    db.exec(&format!("GRANT SELECT ON test.{other} TO '{user}'@'%'"));
    let env = Env::new();
    let c = env.file(
        "c.json",
        r#"{"source": "customers", "limits": {"retries": 0}}"#,
    );
    let src = env.file(
        "my.json",
        &format!(
            r#"{{"dsn": "mysql://{user}:{pw}@127.0.0.1:3306/test", "table": "{t}", "key": "id"}}"#
        ),
    );
    let (code, r, err) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        &format!("mysql:{src}"),
    ]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(r["violations"][0]["kind"], "access_denied");
    assert_eq!(r["conclusion_scope"], "none");
    assert_eq!(r["unique_ids_observed"], 0);

    // A user with no grant on the database at all is refused when it connects.
    let pw2 = canary();
    let stranger = db.user("stranger", &pw2);
    let src = env.file(
        "stranger.json",
        &format!(
            r#"{{"dsn": "mysql://{stranger}:{pw2}@127.0.0.1:3306/test", "table": "{t}", "key": "id"}}"#
        ),
    );
    let (code, r, err) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        &format!("mysql:{src}"),
    ]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(r["violations"][0]["kind"], "access_denied");
}

/// An inline spec carries no password: the user's `~/.my.cnf` gives it (`[client]`, as the
/// MySQL client reads it), and only while others cannot write the file; `MYSQL_PWD` comes
/// first. The password never reaches output or the store.
#[test]
fn the_password_of_an_inline_spec_comes_from_the_users_option_file() {
    use std::os::unix::fs::PermissionsExt;
    let Some(db) = db() else { return };
    let t = db.table("optfile");
    db.numbered(&t, 30);
    let pw = canary();
    let user = db.user("optfile", &pw);
    db.exec(&format!("GRANT SELECT ON test.{t} TO '{user}'@'%'"));
    let env = Env::new();
    let home = env.dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let cnf = home.join(".my.cnf");
    std::fs::write(
        &cnf,
        format!("[mysqld]\nport=1\n[client]\npassword = \"{pw}\"\n"),
    )
    .unwrap();
    let spec = format!("mysql://{user}@127.0.0.1:3306/test?table={t}&key=id");
    let c = env.file("c.json", r#"{"source": "customers", "page_size": 20}"#);
    let mut transcript = String::new();
    let mut scan = |mode: u32, pwd_env: Option<&str>| {
        std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(mode)).unwrap();
        let mut cmd = std::process::Command::new(crate::util::bin());
        cmd.args(["--store", &env.store, "--json", "scan", "--contract", &c])
            .args(["--source", &spec])
            .env("HOME", &home)
            .env_remove("MYSQL_PWD");
        if let Some(p) = pwd_env {
            cmd.env("MYSQL_PWD", p);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        transcript.push_str(&stdout);
        transcript.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.code().unwrap_or(-1), stdout)
    };
    let (code, out) = scan(0o600, None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\"verified\""), "{out}");
    // Writable by others: skipped, so the server refuses the user without a password.
    assert_eq!(scan(0o602, None).0, 3);
    // The environment's password comes before the file's.
    assert_eq!(scan(0o600, Some("wrong")).0, 3);
    assert!(transcript.contains("access_denied"), "{transcript}");
    assert!(
        !transcript.contains(&pw),
        "the password leaked into output:\n{transcript}"
    );
    let store = std::fs::read(&env.store).unwrap();
    assert!(!store.windows(pw.len()).any(|w| w == pw.as_bytes()));
}
