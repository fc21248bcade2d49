-- PostgreSQL 15 docs 9.16: JSON functions and operators (json and jsonb).
SELECT '{"a":1, "b":[1,2,3]}'::json
SELECT '{"b":1, "a":2, "a":3}'::jsonb
SELECT '{"a":  1,"b":   "x"}'::jsonb
SELECT '[1, 2.50, "three", null, true]'::jsonb
SELECT '1e3'::jsonb
SELECT '{"a":1.500}'::jsonb
SELECT '{bad json'::json
SELECT '"\u00e9"'::jsonb
SELECT '"\u0000"'::jsonb
SELECT '[{"a":"foo"},{"b":"bar"},{"c":"baz"}]'::json -> 2
SELECT '[{"a":"foo"},{"b":"bar"},{"c":"baz"}]'::json -> -3
SELECT '{"a": {"b":"foo"}}'::json -> 'a'
SELECT '[1,2,3]'::json ->> 2
SELECT '{"a":1,"b":2}'::json ->> 'b'
SELECT '{"a": {"b": ["foo","bar"]}}'::json #> '{a,b,1}'
SELECT '{"a": {"b": ["foo","bar"]}}'::json #>> '{a,b,1}'
SELECT '[{"a":"foo"},{"b":"bar"},{"c":"baz"}]'::jsonb -> 2
SELECT '{"a": {"b":"foo"}}'::jsonb -> 'a'
SELECT '{"a": {"b":"foo"}}'::jsonb -> 'x'
SELECT '[1,2,3]'::jsonb ->> 2
SELECT '[1,2,3]'::jsonb -> 5
SELECT '{"a":1,"b":2}'::jsonb ->> 'b'
SELECT '{"a":"text"}'::jsonb ->> 'a'
SELECT '{"a":null}'::jsonb ->> 'a'
SELECT '{"a":null}'::jsonb -> 'a'
SELECT '{"a": {"b": ["foo","bar"]}}'::jsonb #> '{a,b,1}'
SELECT '{"a": {"b": ["foo","bar"]}}'::jsonb #>> '{a,b,1}'
SELECT '{"a": {"b": ["foo","bar"]}}'::jsonb #>> '{a}'
SELECT '{"a":1, "b":2}'::jsonb @> '{"b":2}'::jsonb
SELECT '{"b":2}'::jsonb <@ '{"a":1, "b":2}'::jsonb
SELECT '[1,2,[3]]'::jsonb @> '[[3]]'::jsonb
SELECT '{"a":1, "b":2}'::jsonb ? 'b'
SELECT '["a", "b", "c"]'::jsonb ? 'b'
SELECT '{"a":1, "b":2, "c":3}'::jsonb ?| array['b', 'd']
SELECT '["a", "b", "c"]'::jsonb ?& array['a', 'b']
SELECT '["a", "b"]'::jsonb || '["a", "d"]'::jsonb
SELECT '{"a": "b"}'::jsonb || '{"c": "d"}'::jsonb
SELECT '[1, 2]'::jsonb || '3'::jsonb
SELECT '{"a": "b"}'::jsonb || '42'::jsonb
SELECT '[1, 2]'::jsonb || jsonb_build_array('[3, 4]'::jsonb)
SELECT '{"a": "b", "c": "d"}'::jsonb - 'a'
SELECT '["a", "b", "c", "b"]'::jsonb - 'b'
SELECT '{"a": "b", "c": "d"}'::jsonb - '{a,c}'::text[]
SELECT '["a", "b"]'::jsonb - 1
SELECT '["a", {"b":1}]'::jsonb #- '{1,b}'
SELECT '{"a":[1,2,3,4,5]}'::jsonb @? '$.a[*] ? (@ > 2)'
SELECT '{"a":[1,2,3,4,5]}'::jsonb @@ '$.a[*] > 2'
SELECT '{"a":1}'::jsonb = '{"a":1.0}'::jsonb
SELECT '[1,2]'::jsonb < '[1,3]'::jsonb
SELECT to_json('Fred said "Hi."'::text)
SELECT to_jsonb(row(42, 'Fred said "Hi."'::text))
SELECT to_json(42)
SELECT to_json(1.50)
SELECT to_json(true)
SELECT to_json(NULL::text)
SELECT to_json(date '2024-01-02')
SELECT to_json(timestamp '2024-01-02 03:04:05.5')
SELECT to_json(timestamptz '2024-01-02 03:04:05+00')
SELECT to_jsonb(ARRAY[1, 2, NULL])
SELECT to_json('{a,b}'::text[])
SELECT array_to_json('{{1,5},{99,100}}'::int[])
SELECT array_to_json(ARRAY[1, 2], true)
SELECT row_to_json(row(1, 'foo'))
SELECT row_to_json(t) FROM (SELECT 1 AS a, 'x' AS b) t
SELECT json_build_array(1, 2, 'foo', 4, 5)
SELECT jsonb_build_array(1, 2, 'foo', 4, 5, NULL)
SELECT json_build_object('foo', 1, 2, row(3, 'bar'))
SELECT jsonb_build_object('foo', 1, 'bar', 'x', 'baz', NULL)
SELECT json_build_object('a')
SELECT json_object('{a, 1, b, "def", c, 3.5}')
SELECT json_object('{{a, 1}, {b, "def"}, {c, 3.5}}')
SELECT json_object('{a,b}', '{1,2}')
SELECT jsonb_object('{a, 1, b, 2}')
SELECT json_array_elements('[1, true, [2, false]]')
SELECT jsonb_array_elements('[1, true, [2, false]]')
SELECT json_array_elements_text('["foo", "bar"]')
SELECT jsonb_array_elements_text('["foo", "bar", null]')
SELECT json_array_length('[1,2,3,{"f1":1,"f2":[5,6]},4]')
SELECT jsonb_array_length('[]')
SELECT jsonb_array_length('{}')
SELECT * FROM json_each('{"a":"foo", "b":"bar"}') ORDER BY key
SELECT * FROM jsonb_each('{"a":"foo", "b":"bar"}') ORDER BY key
SELECT * FROM json_each_text('{"a":"foo", "b":"bar"}') ORDER BY key
SELECT * FROM jsonb_each_text('{"a":"foo", "b":2}') ORDER BY key
SELECT json_extract_path('{"f2":{"f3":1},"f4":{"f5":99,"f6":"foo"}}', 'f4', 'f6')
SELECT jsonb_extract_path('{"f2":{"f3":1},"f4":{"f5":99,"f6":"foo"}}', 'f4', 'f6')
SELECT json_extract_path_text('{"f2":{"f3":1},"f4":{"f5":99,"f6":"foo"}}', 'f4', 'f6')
SELECT jsonb_extract_path_text('{"f2":{"f3":1},"f4":{"f5":99,"f6":"foo"}}', 'f4', 'f6')
SELECT json_object_keys('{"f1":"abc","f2":{"f3":"a", "f4":"b"}}')
SELECT jsonb_object_keys('{"f1":"abc","f2":{"f3":"a", "f4":"b"}}')
SELECT * FROM json_to_record('{"a":1,"b":[1,2,3],"c":"bar"}') AS x(a int, b text, c text)
SELECT * FROM jsonb_to_recordset('[{"a":1,"b":"foo"}, {"a":"2","c":"bar"}]') AS x(a int, b text)
SELECT jsonb_set('[{"f1":1,"f2":null},2,null,3]', '{0,f1}', '[2,3,4]', false)
SELECT jsonb_set('[{"f1":1,"f2":null},2]', '{0,f3}', '[2,3,4]')
SELECT jsonb_set('{"a":1}', '{b}', '2')
SELECT jsonb_set_lax('[{"f1":1,"f2":null},2,null,3]', '{0,f1}', null)
SELECT jsonb_set_lax('[{"f1":99,"f2":null},2]', '{0,f3}', null, true, 'return_target')
SELECT jsonb_insert('{"a": [0,1,2]}', '{a, 1}', '"new_value"')
SELECT jsonb_insert('{"a": [0,1,2]}', '{a, 1}', '"new_value"', true)
SELECT json_strip_nulls('[{"f1":1, "f2":null}, 2, null, 3]')
SELECT jsonb_strip_nulls('{"a": null, "b": {"c": null, "d": 1}}')
SELECT jsonb_path_exists('{"a":[1,2,3,4,5]}', '$.a[*] ? (@ >= $min && @ <= $max)', '{"min":2, "max":4}')
SELECT jsonb_path_match('{"a":[1,2,3,4,5]}', 'exists($.a[*] ? (@ >= $min && @ <= $max))', '{"min":2, "max":4}')
SELECT jsonb_path_query('{"a":[1,2,3,4,5]}', '$.a[*] ? (@ >= $min && @ <= $max)', '{"min":2, "max":4}')
SELECT jsonb_path_query_array('{"a":[1,2,3,4,5]}', '$.a[*] ? (@ >= $min && @ <= $max)', '{"min":2, "max":4}')
SELECT jsonb_path_query_first('{"a":[1,2,3,4,5]}', '$.a[*] ? (@ >= $min && @ <= $max)', '{"min":2, "max":4}')
SELECT jsonb_path_query('{"a": [1, 2]}', '$.a.size()')
SELECT jsonb_path_query('[1, "a", 2.5]', '$[*].type()')
SELECT jsonb_path_query('{"x": 2.3}', '$.x.floor()')
SELECT jsonb_path_query('"2015-08-01"', '$.datetime()')
SELECT jsonb_pretty('[{"f1":1,"f2":null}, 2]')
SELECT json_typeof('-123.4')
SELECT json_typeof('null'::json)
SELECT jsonb_typeof('"foo"')
SELECT jsonb_typeof('{"a":1}')
SELECT jsonb_typeof('[1]')
SELECT jsonb_typeof('true')
SELECT '{"a":1}'::jsonb::text
SELECT '{"a":1}'::json::jsonb
SELECT '12.5'::jsonb::numeric
SELECT '12'::jsonb::int
SELECT 'true'::jsonb::boolean
SELECT '"x"'::jsonb::int
SELECT ('{"a":5}'::jsonb ->> 'a')::int + 1
SELECT ('{"a":[1,2]}'::jsonb)['a'][1]
SELECT ('{"a":{"b":"c"}}'::jsonb)['a']['b']
SELECT json_agg(x) FROM generate_series(1, 3) AS g(x)
SELECT jsonb_agg(x ORDER BY x DESC) FROM generate_series(1, 3) AS g(x)
SELECT json_object_agg(k, v) FROM (VALUES ('a', 1), ('b', 2)) AS t(k, v)
SELECT jsonb_object_agg(k, v) FROM (VALUES ('b', 1), ('a', 2)) AS t(k, v)
SELECT json_agg(t ORDER BY id) FROM (SELECT id, s FROM pgf_t WHERE id < 3) t
SELECT jsonb_agg(s ORDER BY id) FROM pgf_t
SELECT jsonb_build_object('n', n, 's', s) FROM pgf_t WHERE id = 1
SELECT to_jsonb(t) FROM pgf_t t WHERE id = 2
SELECT row_to_json(t) FROM pgf_t t WHERE id = 3
SELECT jsonb_array_elements('[1,2,3]')::int * 2
SELECT count(*) FROM jsonb_array_elements('[1,2,3]')
SELECT value FROM jsonb_array_elements('[{"a":1},{"a":2}]') ORDER BY value
SELECT x ->> 'a' FROM (SELECT '{"a":"q"}'::jsonb AS x) s
SELECT '{"a":1}'::jsonb ? 'a' AND '{"a":1}'::jsonb ? 'b'
SELECT jsonb_path_query_array('[1,2,3]', '$[*] * 2')
SELECT jsonb_path_query('{"a":"x"}', 'strict $.b')
SELECT jsonb_path_query('{"a":"x"}', 'lax $.b')
SELECT '{"a":1}'::jsonpath
SELECT '$.a[*] ? (@ > 1)'::jsonpath
