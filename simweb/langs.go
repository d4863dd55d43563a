package simweb

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Multilingual pages (Config.Languages): the language of a page's main text follows its text
// seed, so mirrors, print variants and near-duplicates share it. Words are drawn from a
// per-language bank of common words; Chinese and Japanese write no spaces between words and
// end sentences with "。", Hindi with "।", Arabic with ".". The <html lang> attribute is right
// on most pages, absent on some and wrong on others (see langAttrOf).

// Language codes served when Config.Languages is on (ISO 639-1), in the order of langBanks.
var Languages = []string{"en", "de", "fr", "es", "ru", "zh", "ja", "ar", "hi"}

// LangAttr kinds: how a page's <html lang> relates to its true language.
const (
	LangAttrRight = "right"
	LangAttrNone  = "none"
	LangAttrWrong = "wrong"
)

type langBank struct {
	words    []string
	spaced   bool   // words separated by spaces
	cased    bool   // sentences start with a capital
	stop     string // sentence end
	comma    string
	wrongTag string // the lang attribute a page gets when it is wrong
}

var langBanks = []langBank{
	{words: wordList[:], spaced: true, cased: true, comma: ",", stop: ".", wrongTag: "de"},
	{words: strings.Fields(deWords), spaced: true, cased: true, comma: ",", stop: ".", wrongTag: "en"},
	{words: strings.Fields(frWords), spaced: true, cased: true, comma: ",", stop: ".", wrongTag: "en"},
	{words: strings.Fields(esWords), spaced: true, cased: true, comma: ",", stop: ".", wrongTag: "fr"},
	{words: strings.Fields(ruWords), spaced: true, cased: true, comma: ",", stop: ".", wrongTag: "en"},
	{words: strings.Fields(zhWords), stop: "。", comma: "，", wrongTag: "ja"},
	{words: strings.Fields(jaWords), stop: "。", comma: "、", wrongTag: "zh"},
	{words: strings.Fields(arWords), spaced: true, stop: ".", comma: "،", wrongTag: "en"},
	{words: strings.Fields(hiWords), spaced: true, comma: ",", stop: " ।", wrongTag: "en"},
}

// langIndex is the index in Languages of a page's language: 0 (English) unless
// Config.Languages is on.
func (w *Web) langIndex(d *doc) int {
	if !w.cfg.Languages {
		return 0
	}
	return int(mix(d.textSeed, 77) % uint64(len(langBanks)))
}

// langAttr returns the <html lang> value of a page ("" for none) and its kind. Without
// Config.Languages every page says "en", as it always did.
func (w *Web) langAttr(d *doc) (string, string) {
	li := w.langIndex(d)
	if !w.cfg.Languages {
		return "en", LangAttrRight
	}
	switch x := mix(d.textSeed, 78) % 20; {
	case x < 3:
		return langBanks[li].wrongTag, LangAttrWrong
	case x < 8:
		return "", LangAttrNone
	}
	return Languages[li], LangAttrRight
}

// capitalize upper-cases the first rune of s.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// The banks below hold common words of each language (function words, nouns, verbs,
// adjectives), enough for a trigram detector to tell the language from a paragraph.

const deWords = `der die das und ist nicht ein eine einen einem einer zu den von mit sich des auf
für im dem auch es an als nach wie aus bei oder wird werden hat haben sind war waren noch nur
über so vor zur zum aber mehr durch man sein ihre ihr wenn schon sehr kann können muss müssen
jetzt immer unter bis gegen ohne zwischen während weil dass diese dieser dieses jeder viele
alle andere neue neuen großen kleinen ersten letzten heute gestern morgen Jahr Jahre Zeit Tag
Tage Woche Menschen Leben Welt Land Stadt Haus Arbeit Schule Kinder Frau Mann Familie Freund
Geschichte Regierung Unternehmen Wasser Straße Weg Frage Antwort Teil Ende Anfang Beispiel
Grund Recht Geld Markt Preis Stunde Abend Nacht Hand Kopf Auge Buch Wort Sprache Zeitung
Bericht Entwicklung Forschung Gesellschaft Wirtschaft Politik Bürger Gemeinde Kirche Wald Berg
Fluss Garten Küche Zimmer Fenster Tür Wagen Bahnhof Brücke Dorf gehen kommen sehen machen sagen
geben nehmen finden bleiben stehen liegen halten bringen denken wissen lassen zeigen spielen
arbeiten leben glauben sprechen schreiben lesen lernen fahren beginnen erklären erhalten
gut schön lang hoch alt jung klein groß wichtig einfach schwer deutsch möglich wirklich
besonders bereits etwa fast wieder dann damit darauf dabei deshalb trotzdem zusammen wohl
natürlich vielleicht gleich ganz genau weiter einmal sondern sowie bisher später nämlich`

const frWords = `le la les de des du un une et est en que qui dans pour pas sur au aux avec ce
cette ces il elle ils elles nous vous on se sa son ses leur leurs plus par mais ou comme tout
tous toute bien très aussi être avoir fait faire dit dire peut pouvoir doit devoir va aller
voir venir prendre donner trouver mettre parler penser savoir rester passer croire sembler
laisser suivre comprendre connaître vivre écrire lire apprendre ouvrir attendre répondre
temps année jour jours semaine monde vie pays ville maison travail école enfant enfants femme
homme famille ami histoire gouvernement entreprise eau rue chemin question réponse partie fin
début exemple raison droit argent marché prix heure soir nuit main tête œil livre mot langue
journal rapport développement recherche société économie politique citoyen commune église
forêt montagne rivière jardin cuisine chambre fenêtre porte voiture gare pont village nouveau
nouvelle grand grande petit petite premier dernier bon bonne beau belle long haut vieux jeune
important simple difficile français possible vraiment surtout déjà encore toujours jamais
souvent alors donc ainsi ensuite depuis pendant avant après sans sous entre contre chez vers
selon malgré lorsque parce puisque quand comment pourquoi où aujourd'hui hier demain ici
là beaucoup peu trop assez même autre autres chaque plusieurs certains quelque rien personne`

const esWords = `el la los las de del un una unos unas y es en que por con para no se su sus al
lo como más pero sus le ya o este esta estos estas ese esa muy también fue ha han hay ser
estar tener hacer poder decir ir ver dar saber querer llegar pasar deber poner parecer quedar
creer hablar llevar dejar seguir encontrar llamar venir pensar salir volver tomar conocer
vivir sentir tratar mirar contar empezar esperar buscar existir entrar trabajar escribir
perder producir ocurrir entender pedir recibir recordar terminar permitir aparecer conseguir
tiempo año años día días semana mundo vida país ciudad casa trabajo escuela niño niños mujer
hombre familia amigo historia gobierno empresa agua calle camino pregunta respuesta parte fin
principio ejemplo razón derecho dinero mercado precio hora tarde noche mano cabeza ojo libro
palabra lengua periódico informe desarrollo investigación sociedad economía política ciudadano
pueblo iglesia bosque montaña río jardín cocina habitación ventana puerta coche estación
puente nuevo nueva grande pequeño pequeña primero último bueno buena largo alto viejo joven
importante sencillo difícil español posible realmente sobre todo siempre nunca entonces
después antes durante desde hasta entre contra sin según mientras cuando donde porque aunque
hoy ayer mañana aquí allí mucho poco demasiado bastante mismo otro otros cada varios algunos
nada nadie algo todavía además sino cual cuyo quien nosotros ellos ellas usted`

const ruWords = `и в не на я что он с как а то все она так его но да ты к у же вы за бы по только
ее мне было вот от меня еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть
был него до вас нибудь опять уж вам ведь там потом себя ничего ей может они тут где есть надо
ней для мы тебя их чем была сам чтоб без будто чего раз тоже себе под будет ж тогда кто этот
того потому этого какой совсем ним здесь этом один почти мой тем чтобы нее сейчас были куда
зачем всех никогда можно при наконец два об другой хоть после над больше тот через эти нас про
всего них какая много разве три эту моя впрочем хорошо свою этой перед иногда лучше чуть том
нельзя такой им более всегда конечно всю между время год человек дело жизнь день рука работа
слово место лицо друг глаз вопрос дом сторона страна мир случай голова ребенок сила конец вид
система часть город отношение женщина деньги земля машина вода отец проблема час право нога
решение дверь образ история власть закон война бог голос тысяча книга возможность результат
ночь стол имя область статья число компания народ жена группа развитие процесс суд условие
средство начало свет пора путь душа уровень форма связь минута улица вечер качество мысль
дорога мать действие месяц государство язык любовь взгляд мама век школа цель общество
говорить сказать знать стать хотеть идти думать видеть сделать понять иметь смотреть
новый большой хороший последний главный русский старый молодой важный простой`

const zhWords = `的 是 在 不 了 有 和 人 这 中 大 为 上 个 国 我 以 要 他 时 来 用 们 生 到 作 地 于
出 就 分 对 成 会 可 主 发 年 动 同 工 也 能 下 过 子 说 产 种 面 而 方 后 多 定 行 学 法 所
民 得 经 十 三 之 进 着 等 部 度 家 电 力 里 如 水 化 高 自 二 理 起 小 物 现 实 加 量 都 两
体 制 机 当 使 点 从 业 本 去 把 性 好 应 开 它 合 还 因 由 其 些 然 前 外 天 政 四 日 那 社
义 事 平 形 相 全 表 间 样 与 关 各 重 新 线 内 数 正 心 反 你 明 看 原 又 么 利 比 或 但 质
气 第 向 道 命 此 变 条 只 没 结 解 问 意 建 月 公 无 系 军 很 情 者 最 立 代 想 已 通 并 提
直 题 党 程 展 五 果 料 象 员 革 位 入 常 文 总 次 品 式 活 设 及 管 特 件 长 求 老 头 基 资
边 流 路 级 少 图 山 统 接 知 较 将 组 见 计 别 她 手 角 期 根 论 运 农 指 几 九 区 强 放 决
西 被 干 做 必 战 先 回 则 任 取 据 处 队 南 给 色 光 门 即 保 治 北 造 百 规 热 领 七 海 口
东 导 器 压 志 世 金 增 争 济 阶 油 思 术 极 交 受 联 什 认 六 共 权 收 证 改 清 美 再 采 转
我们 他们 今天 学校 城市 国家 时间 问题 工作 发展 经济 社会 政府 历史 文化 朋友 孩子`

const jaWords = `の に は を た が で て と し れ さ ある いる も する から な こと として い や
れる など なっ ない この ため その あっ よう また もの という あり まで られ なる へ か だ
これ によって により おり より による ず なり られる において ば なかっ なく しかし について
せ だっ その後 できる それ う ので なお のみ でき き つ における および いう さらに でも ら
たり その他 に関する たち ます ん なら に対して 特に せる 及び これら とき では にて ほか
ながら うち そして とともに ただし かつて それぞれ または お ほど ものの に対する ほとんど
と共に といった です とも ところ ここ 日本 時間 学校 会社 仕事 世界 家族 友達 子ども 町
国 人々 問題 政府 歴史 文化 経済 社会 新しい 大きい 小さい 古い 若い 長い 高い 多い 少ない
見る 行く 来る 書く 読む 話す 聞く 食べる 飲む 考える 思う 知る 分かる 使う 作る 住む 働く
今日 明日 昨日 毎日 午後 夜 朝 年 月 週 山 川 海 空 雨 雪 花 木 森 道 駅 橋 村 店 本 言葉
ひとつ ふたつ いつも まだ もう すぐ とても ちょっと よく たくさん みんな わたし あなた`

const arWords = `في من على إلى أن عن مع هذا هذه التي الذي كان كانت لا ما لم لن قد كل بعد قبل بين
عند حتى ثم أو أي هو هي هم نحن أنا أنت ذلك تلك هناك هنا غير بعض أكثر أول آخر كما أيضا لكن
إن إذا لأن حيث منذ خلال حول ضد دون فوق تحت يوم سنة شهر أسبوع وقت عام العالم الناس الحياة
البلد المدينة البيت العمل المدرسة الطفل الأطفال المرأة الرجل العائلة الصديق التاريخ الحكومة
الشركة الماء الشارع الطريق السؤال الجواب الجزء النهاية البداية المثال السبب الحق المال السوق
السعر الساعة المساء الليل اليد الرأس العين الكتاب الكلمة اللغة الصحيفة التقرير التنمية البحث
المجتمع الاقتصاد السياسة المواطن القرية المسجد الغابة الجبل النهر الحديقة المطبخ الغرفة النافذة
الباب السيارة المحطة الجسر جديد جديدة كبير كبيرة صغير صغيرة طويل عال قديم شاب مهم بسيط صعب
عربي ممكن حقا دائما أبدا اليوم أمس غدا كثير قليل نفس آخرون كثيرا قال يقول كتب يكتب ذهب يذهب
جاء يأتي رأى يرى عرف يعرف أراد يريد وجد يجد أخذ يأخذ أعطى يعطي عمل يعمل فكر يفكر فهم يفهم
تحدث يتحدث بدأ يبدأ أصبح يصبح ظل بقي الذين اللذين والتي وفي ومن وعلى وقال وكان بأن لها له
بها به منها منه فيها فيه عليها عليه إليها إليه الدولة الوطنية الأمم المتحدة الرئيس الوزير`

const hiWords = `के है में की और से को का एक पर यह भी हैं कि था नहीं तो ही या हो गया कर इस
लिए किया जो थे वह करने रहा कुछ जा सकता साथ बाद अपने उन्होंने अब होता जब तक वे इसके हुए
करते होने कहा उनके जाता कोई दिया रहे किसी सभी अपनी यहां वहां लेकिन क्योंकि अगर फिर बहुत
कम ज्यादा अधिक सबसे पहले दूसरे नया नई पुराना बड़ा बड़ी छोटा छोटी अच्छा अच्छी लंबा ऊंचा
युवा महत्वपूर्ण आसान कठिन भारतीय संभव सचमुच हमेशा कभी आज कल यहाँ वहाँ समय साल दिन सप्ताह
महीना दुनिया लोग जीवन देश शहर घर काम स्कूल बच्चा बच्चे महिला आदमी परिवार दोस्त इतिहास
सरकार कंपनी पानी सड़क रास्ता सवाल जवाब हिस्सा अंत शुरुआत उदाहरण कारण अधिकार पैसा बाजार
कीमत घंटा शाम रात हाथ सिर आंख किताब शब्द भाषा अखबार रिपोर्ट विकास शोध समाज अर्थव्यवस्था
राजनीति नागरिक गांव मंदिर जंगल पहाड़ नदी बगीचा रसोई कमरा खिड़की दरवाजा गाड़ी स्टेशन पुल
जाना आना देखना करना कहना देना लेना मिलना रहना सोचना जानना लिखना पढ़ना सीखना बोलना सुनना
खाना पीना चलना खेलना समझना बताना पूछना हम आप मैं तुम उनका हमारा आपका मेरा तुम्हारा`
